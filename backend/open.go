package backend

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
)

// Opener opens a backend from a URL whose scheme it was registered for.
type Opener func(ctx context.Context, url string, opts OpenOptions) (Backend, error)

// OpenOptions says how Open treats a store that is not there yet.
type OpenOptions struct {
	// Existing opens only a store that already holds an up-to-date jobq
	// schema: nothing is created or migrated (no file, database, schema or
	// table), and a missing or older schema fails with an error wrapping
	// ErrNoSchema. Commands that only read use it, so a mistyped path or
	// schema name is reported instead of silently created empty. Backends
	// that keep nothing beyond the process (memory:, sync:) refuse it with
	// ErrInvalidInput.
	Existing bool
	// Logger receives what a backend says about the store at open, such
	// as Redis running without persistence. Nil means slog.Default(); a
	// short command passes one that discards, so the warning comes once
	// per worker or server rather than on every enqueue.
	Logger *slog.Logger
}

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
// "postgres://…", "memory:", "sync:") and opens it, creating and migrating
// its schema as needed. An unknown scheme is an ErrInvalidInput error that
// lists the accepted ones. Errors never show the URL's password (see
// RedactURL).
func Open(ctx context.Context, url string) (Backend, error) {
	return OpenWith(ctx, url, OpenOptions{})
}

// OpenWith is Open with options; see OpenOptions.
func OpenWith(ctx context.Context, url string, opts OpenOptions) (Backend, error) {
	scheme, _, ok := strings.Cut(url, ":")
	if !ok || scheme == "" {
		return nil, &InputError{Field: "backend URL", Reason: fmt.Sprintf("%q has no scheme; use one of %s (e.g. sqlite:jobq.db)", RedactURL(url), schemeList())}
	}
	openersMu.RLock()
	open, found := openers[strings.ToLower(scheme)]
	openersMu.RUnlock()
	if !found {
		return nil, &InputError{Field: "backend URL", Reason: fmt.Sprintf("unknown scheme %q; use one of %s", scheme, schemeList())}
	}
	b, err := open(ctx, url, opts)
	if err != nil {
		return nil, RedactError(err, url)
	}
	return b, nil
}

// RedactError scrubs the secrets of the backend URL url from err's text
// (see Redact), keeping what errors.Is and errors.As find. It returns err
// itself when there was nothing to scrub, and nil for nil.
func RedactError(err error, url string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := Redact(msg, url); clean != msg {
		return &redactedError{msg: clean, err: err}
	}
	return err
}

// redactedError is an error whose text had secrets removed; it still
// unwraps to the original so callers can branch on the sentinels.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func schemeList() string {
	s := Schemes()
	for i := range s {
		s[i] += ":"
	}
	return strings.Join(s, ", ")
}
