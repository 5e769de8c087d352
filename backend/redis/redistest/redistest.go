// Package redistest helps tests that need a Redis server: the shared
// development server (or a cluster) with a throwaway key prefix per test.
//
// A missing server skips the test with the reason, except under CI=true,
// where it fails: there a missing server is a broken setup, not a choice.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// EnvURL names the environment variable that overrides DefaultURL, e.g.
// with a cluster: redis://127.0.0.1:7001?cluster=true&addr=127.0.0.1:7002.
const EnvURL = "JOBQ_TEST_REDIS_URL"

// DefaultURL is the shared development server.
const DefaultURL = "redis://127.0.0.1:6379/0"

var (
	reachMu  sync.Mutex
	reachErr = map[string]error{}
)

// URL returns the test server's URL ($JOBQ_TEST_REDIS_URL or DefaultURL)
// after checking once per process that it answers; otherwise it skips tb
// (fails it under CI=true).
func URL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		u = DefaultURL
	}
	if err := Reachable(u); err != nil {
		Unavailable(tb, "redis not reachable at %s: %v", u, err)
	}
	return u
}

// Reachable checks once per process and URL that the server answers.
func Reachable(u string) error {
	reachMu.Lock()
	defer reachMu.Unlock()
	if err, ok := reachErr[u]; ok {
		return err
	}
	c, err := Client(u)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = c.Do(ctx, c.B().Ping().Build()).Error()
		cancel()
		c.Close()
	}
	reachErr[u] = err
	return err
}

// Unavailable skips tb, or fails it under CI=true.
func Unavailable(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf(format, args...)
	}
	tb.Skipf(format, args...)
}

// Client returns a rueidis client for a test URL: redis://host:port/db,
// or a cluster as redis://host:port?cluster=true&addr=host:port&…; other
// parameters (key_prefix, timeout, …) are ignored. It connects at once, so
// an unreachable server is an error here.
func Client(raw string) (rueidis.Client, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("test URL: %w", err)
	}
	q := u.Query()
	opts := rueidis.ClientOption{
		InitAddress:       []string{u.Host},
		ForceSingleClient: true,
		DisableCache:      true,
		AlwaysRESP2:       true,
		ClientSetInfo:     rueidis.DisableClientSetInfo,
	}
	if u.User != nil {
		opts.Username = u.User.Username()
		opts.Password, _ = u.User.Password()
	}
	if q.Get("cluster") == "true" {
		opts.ForceSingleClient = false
		opts.InitAddress = append(opts.InitAddress, q["addr"]...)
	} else if db := strings.Trim(u.Path, "/"); db != "" {
		if _, err := fmt.Sscan(db, &opts.SelectDB); err != nil {
			return nil, fmt.Errorf("test URL: database %q", db)
		}
	}
	// One seed at a time: given several, rueidis dials them all at once
	// and may leave a goroutine closing the extra connections after Close,
	// which goleak reports.
	var c rueidis.Client
	for _, a := range slices.Clone(opts.InitAddress) {
		opts.InitAddress = []string{a}
		if c, err = rueidis.NewClient(opts); err == nil {
			break
		}
	}
	return c, err
}

// Prefix returns a fresh key prefix ("jobqt_" and 12 hex digits) and
// deletes every key under it when tb ends, after the cleanups registered
// later (closing backends that use it).
func Prefix(tb testing.TB, u string) string {
	tb.Helper()
	var buf [6]byte
	_, _ = rand.Read(buf[:])
	prefix := "jobqt_" + hex.EncodeToString(buf[:])
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := DeletePrefix(ctx, u, prefix); err != nil {
			tb.Errorf("delete keys of prefix %s: %v", prefix, err)
		}
	})
	return prefix
}

// Keys lists every key under prefix (on every master of a cluster).
func Keys(ctx context.Context, u, prefix string) ([]string, error) {
	c, err := Client(u)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var out []string
	err = eachMaster(ctx, c, func(ctx context.Context, n rueidis.Client) error {
		keys, err := scan(ctx, n, prefix+":*")
		out = append(out, keys...)
		return err
	})
	return out, err
}

// DeletePrefix deletes every key under prefix.
func DeletePrefix(ctx context.Context, u, prefix string) error {
	c, err := Client(u)
	if err != nil {
		return err
	}
	defer c.Close()
	return eachMaster(ctx, c, func(ctx context.Context, n rueidis.Client) error {
		keys, err := scan(ctx, n, prefix+":*")
		if err != nil || len(keys) == 0 {
			return err
		}
		// One key a command: on a cluster, keys of one call must share a
		// slot.
		cmds := make(rueidis.Commands, len(keys))
		for i, k := range keys {
			cmds[i] = n.B().Unlink().Key(k).Build()
		}
		for _, r := range n.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return err
			}
		}
		return nil
	})
}

// eachMaster calls fn with a client of each master (of the server itself
// when it is not a cluster), one after the other.
func eachMaster(ctx context.Context, c rueidis.Client, fn func(ctx context.Context, n rueidis.Client) error) error {
	for _, n := range c.Nodes() {
		role, err := n.Do(ctx, n.B().Role().Build()).ToArray()
		if err != nil {
			return err
		}
		if len(role) > 0 {
			if r, _ := role[0].ToString(); r != "master" {
				continue
			}
		}
		if err := fn(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// scan lists the keys matching match. Each call reads 10,000 slots of the
// keyspace: the cleanup of a test's prefix walks the whole database, and a
// server holding millions of other keys made 1,000 a call outlast its
// 30-second bound under load.
func scan(ctx context.Context, c rueidis.Client, match string) ([]string, error) {
	var out []string
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(match).Count(10000).Build()).AsScanEntry()
		if err != nil {
			return nil, err
		}
		out = append(out, e.Elements...)
		if e.Cursor == 0 {
			return out, nil
		}
		cursor = e.Cursor
	}
}
