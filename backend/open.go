package backend

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Opener opens a backend from a URL whose scheme it was registered for.
type Opener func(ctx context.Context, url string) (Backend, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// Register makes a backend available to Open under scheme (without the
// colon). Backend packages call it from init, as database/sql drivers do;
// import a backend package (or jobq/backend/all) for its scheme to work.
// Registering a scheme twice panics: it is a programming error.
func Register(scheme string, open Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("backend: Register called twice for scheme " + scheme)
	}
	openers[scheme] = open
}

// Schemes lists the registered URL schemes, sorted.
func Schemes() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	out := make([]string, 0, len(openers))
	for s := range openers {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Open chooses a backend by the URL's scheme ("sqlite:jobq.db",
// "postgres://…", "memory:", "sync:") and opens it. An unknown scheme is an
// ErrInvalidInput error that lists the accepted ones.
func Open(ctx context.Context, url string) (Backend, error) {
	scheme, _, ok := strings.Cut(url, ":")
	if !ok || scheme == "" {
		return nil, &InputError{Field: "backend URL", Reason: fmt.Sprintf("%q has no scheme; use one of %s (e.g. sqlite:jobq.db)", url, schemeList())}
	}
	openersMu.RLock()
	open, found := openers[strings.ToLower(scheme)]
	openersMu.RUnlock()
	if !found {
		return nil, &InputError{Field: "backend URL", Reason: fmt.Sprintf("unknown scheme %q; use one of %s", scheme, schemeList())}
	}
	return open(ctx, url)
}

func schemeList() string {
	s := Schemes()
	for i := range s {
		s[i] += ":"
	}
	return strings.Join(s, ", ")
}
