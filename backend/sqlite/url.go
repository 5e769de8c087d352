package sqlite

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/backend"
)

func init() {
	backend.Register("sqlite", func(ctx context.Context, u string, oo backend.OpenOptions) (backend.Backend, error) {
		path, opts, err := ParseURL(u)
		if err != nil {
			return nil, err
		}
		opts.Existing = oo.Existing
		opts.Logger = oo.Logger
		b, err := Open(ctx, path, opts)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return b, nil
	})
}

// ParseURL splits a backend URL into the file path and Options that Open
// takes. Accepted forms:
//
//	sqlite:jobq.db              relative to the working directory
//	sqlite:/var/lib/jobq.db     absolute
//	sqlite:///var/lib/jobq.db   absolute, URL style
//	sqlite://jobq.db            relative, URL style
//
// followed by optional query parameters:
//
//	busy_timeout=5s   Options.BusyTimeout (a Go duration, or plain milliseconds;
//	                  0 means the default, 10s)
//	migrate=false     Options.NoMigrate
//	wake_interval=10ms  Options.WakeInterval (a Go duration, or plain
//	                  milliseconds; 0 means the default, 5ms; off turns the
//	                  watcher of other processes' commits off)
//
// The path is taken literally (no %-decoding). Anything else, or an empty
// path, is an error wrapping backend.ErrInvalidInput.
func ParseURL(u string) (string, Options, error) {
	var opts Options
	scheme, rest, ok := strings.Cut(u, ":")
	if !ok || !strings.EqualFold(scheme, "sqlite") {
		return "", opts, urlError(u, "the scheme must be sqlite:")
	}
	rest = strings.TrimPrefix(rest, "//")
	path, query, _ := strings.Cut(rest, "?")
	if path == "" {
		return "", opts, urlError(u, "no file path; e.g. sqlite:jobq.db or sqlite:///var/lib/jobq.db")
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return "", opts, urlError(u, "bad query: "+err.Error())
	}
	for key, vs := range values {
		v := vs[len(vs)-1]
		switch key {
		case "busy_timeout":
			d, err := parseDuration(key, v)
			if err != nil {
				return "", opts, urlError(u, err.Error())
			}
			opts.BusyTimeout = d
		case "wake_interval":
			if v == "off" {
				opts.WakeInterval = -1
				continue
			}
			d, err := parseDuration(key, v)
			if err != nil {
				return "", opts, urlError(u, err.Error()+" (or off)")
			}
			opts.WakeInterval = d
		case "migrate":
			m, err := strconv.ParseBool(v)
			if err != nil {
				return "", opts, urlError(u, fmt.Sprintf("migrate=%q: use true or false", v))
			}
			opts.NoMigrate = !m
		default:
			return "", opts, urlError(u, fmt.Sprintf("unknown parameter %q; accepted: busy_timeout, migrate, wake_interval", key))
		}
	}
	return path, opts, nil
}

// parseDuration reads the value v of the URL parameter key: a Go duration,
// or plain milliseconds; never negative.
func parseDuration(key, v string) (time.Duration, error) {
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms >= 0 {
		return time.Duration(ms) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: use a duration such as 5s or 500ms", key, v)
	}
	return d, nil
}

func urlError(u, reason string) error {
	return &backend.InputError{Field: "sqlite URL", Reason: fmt.Sprintf("%q: %s", u, reason)}
}
