package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq/backend"
)

// This file is the backend's whole view of its Redis client (go-redis v9):
// script runs, pipelines, the few plain commands, pub/sub, and the reading
// of the client's errors. Nothing else in the package imports go-redis, so
// the client can be swapped by rewriting this file.

func init() {
	// go-redis prints its connection troubles to stderr; this backend
	// reports them as errors already, so they go to slog at debug level.
	// An application that sets go-redis's logger after importing jobq
	// keeps its own.
	goredis.SetLogger(debugLogger{})
}

// debugLogger forwards go-redis's log lines to slog.Default at debug level.
type debugLogger struct{}

func (debugLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.Default().DebugContext(ctx, "go-redis: "+fmt.Sprintf(format, v...))
}

// clientConfig is what a client is made from (see url.go).
type clientConfig struct {
	addrs    []string // one address, or a cluster's seed addresses
	cluster  bool
	username string
	password string
	db       int
	tls      *tls.Config
	poolSize int // 0: go-redis's default (10 per CPU)
	timeout  time.Duration
}

// client runs commands with a timeout each and reports failures as errors
// wrapping the backend sentinels (see classify).
type client struct {
	rdb     goredis.UniversalClient
	cluster bool
	host    string // the first address, for error messages
	timeout time.Duration
	// slots, when set (tests set it), checks that the keys of every
	// script call share one Cluster slot, and counts the calls.
	slots *slotCheck
}

func newClient(cfg clientConfig) *client {
	opts := &goredis.UniversalOptions{
		Addrs:         cfg.addrs,
		IsClusterMode: cfg.cluster,
		Username:      cfg.username,
		Password:      cfg.password,
		DB:            cfg.db,
		TLSConfig:     cfg.tls,
		PoolSize:      cfg.poolSize,
		// RESP2: the replies of scripts keep their Lua-to-RESP2 shapes.
		Protocol: 2,
		// No resends: a script whose reply was lost may have run, and
		// running an insert or a claim twice is not harmless. Connection
		// failures surface as ErrUnavailable; callers back off and retry.
		MaxRetries:    -1,
		DialerRetries: 1,
		// The call timeout: go-redis waits at most this long for a
		// connection, to write a command and to read its reply (socket
		// deadlines set on every command), so a call to a server that
		// stopped answering fails within about that, with ErrUnavailable
		// (classify). A caller's earlier deadline still applies. A timer
		// context per call on top of these cost about 5 µs of CPU a
		// call, a twentieth of a single enqueue's round trip.
		DialTimeout:           cfg.timeout,
		PoolTimeout:           cfg.timeout,
		ReadTimeout:           cfg.timeout,
		WriteTimeout:          cfg.timeout,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		// Cluster: follow MOVED/ASK (a redirected command did not run).
		MaxRedirects: 8,
	}
	if !cfg.cluster && len(opts.Addrs) > 1 {
		opts.Addrs = opts.Addrs[:1]
	}
	return &client{rdb: goredis.NewUniversalClient(opts), cluster: cfg.cluster, host: cfg.addrs[0], timeout: cfg.timeout}
}

func (c *client) close() error { return c.rdb.Close() }

// script is one script of scripts.lua, run by EVALSHA and loaded by EVAL
// when the server does not know it (a restart flushes the cache).
type script struct {
	name string
	src  string
	s    *goredis.Script
}

func newScript(name, src string) *script {
	return &script{name: name, src: src, s: goredis.NewScript(src)}
}

// eval runs one script.
func (c *client) eval(ctx context.Context, s *script, keys []string, args []any) (any, error) {
	if err := c.slots.check(s, keys); err != nil {
		return nil, err
	}
	res, err := s.s.Run(ctx, c.rdb, keys, args...).Result()
	return res, c.classify(ctx, err)
}

// evalCall is one script run of evalAll, with its outcome.
type evalCall struct {
	s    *script
	keys []string
	args []any
	res  any
	err  error
}

// evalAll runs calls in one pipeline, in a MULTI/EXEC transaction when
// atomic on a single server (a cluster refuses a transaction over several
// slots, and every call is atomic by itself anyway: it is one script).
// Each call gets its own result or error; evalAll returns the first error.
// A call the server refused with NOSCRIPT did not run, so it is sent again
// with EVAL.
func (c *client) evalAll(ctx context.Context, calls []*evalCall, atomic bool) error {
	if len(calls) == 1 {
		calls[0].res, calls[0].err = c.eval(ctx, calls[0].s, calls[0].keys, calls[0].args)
		return calls[0].err
	}
	var pipe goredis.Pipeliner
	if atomic && !c.cluster {
		pipe = c.rdb.TxPipeline()
	} else {
		pipe = c.rdb.Pipeline()
	}
	cmds := make([]*goredis.Cmd, len(calls))
	for i, call := range calls {
		if err := c.slots.check(call.s, call.keys); err != nil {
			return err
		}
		cmds[i] = pipe.EvalSha(ctx, call.s.s.Hash(), call.keys, call.args...)
	}
	_, _ = pipe.Exec(ctx)
	var first error
	for i, call := range calls {
		res, err := cmds[i].Result()
		if isNoScript(err) {
			res, err = call.s.s.Eval(ctx, c.rdb, call.keys, call.args...).Result()
		}
		call.res, call.err = res, c.classify(ctx, err)
		if first == nil {
			first = call.err
		}
	}
	return first
}

func isNoScript(err error) bool {
	return err != nil && (errors.Is(err, goredis.ErrNoScript) || goredis.HasErrorPrefix(err, "NOSCRIPT"))
}

// loadScripts loads every script into the server's script cache (every
// master of a cluster), so that pipelines rarely meet NOSCRIPT.
func (c *client) loadScripts(ctx context.Context, scripts []*script) error {
	for _, s := range scripts {
		if err := s.s.Load(ctx, c.rdb).Err(); err != nil {
			return c.classify(ctx, err)
		}
	}
	return nil
}

// get returns a string key's value and whether it exists.
func (c *client) get(ctx context.Context, key string) (string, bool, error) {
	v, err := c.rdb.Get(ctx, key).Result()
	if errors.Is(err, goredis.Nil) {
		return "", false, nil
	}
	return v, err == nil, c.classify(ctx, err)
}

// set sets a string key.
func (c *client) set(ctx context.Context, key, value string) error {
	return c.classify(ctx, c.rdb.Set(ctx, key, value, 0).Err())
}

// incr raises a counter by one.
func (c *client) incr(ctx context.Context, key string) error {
	return c.classify(ctx, c.rdb.Incr(ctx, key).Err())
}

// hgetAll returns every field of a hash (none when it does not exist).
func (c *client) hgetAll(ctx context.Context, key string) (map[string]string, error) {
	m, err := c.rdb.HGetAll(ctx, key).Result()
	return m, c.classify(ctx, err)
}

// hmgetAll reads fields of several hashes in one pipeline. A missing
// hash or field reads as nil.
func (c *client) hmgetAll(ctx context.Context, keys []string, fields ...string) ([][]any, error) {
	if len(keys) == 1 {
		v, err := c.rdb.HMGet(ctx, keys[0], fields...).Result()
		if err != nil {
			return nil, c.classify(ctx, err)
		}
		return [][]any{v}, nil
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*goredis.SliceCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HMGet(ctx, k, fields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, c.classify(ctx, err)
	}
	out := make([][]any, len(keys))
	for i, cmd := range cmds {
		out[i] = cmd.Val()
	}
	return out, nil
}

// existAll reports which of keys exist, in one pipeline.
func (c *client) existAll(ctx context.Context, keys []string) ([]bool, error) {
	pipe := c.rdb.Pipeline()
	cmds := make([]*goredis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.Exists(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, c.classify(ctx, err)
	}
	out := make([]bool, len(keys))
	for i, cmd := range cmds {
		out[i] = cmd.Val() > 0
	}
	return out, nil
}

// configGet returns the value of one server setting. A server that
// refuses CONFIG (managed services often do) is an error.
func (c *client) configGet(ctx context.Context, name string) (string, error) {
	m, err := c.rdb.ConfigGet(ctx, name).Result()
	if err != nil {
		return "", c.classify(ctx, err)
	}
	v, ok := m[name]
	if !ok {
		return "", fmt.Errorf("CONFIG GET %s: no such setting", name)
	}
	return v, nil
}

// ping checks that the server answers.
func (c *client) ping(ctx context.Context) error {
	return c.classify(ctx, c.rdb.Ping(ctx).Err())
}

// pubsub is one subscriber connection. go-redis re-establishes it and its
// subscriptions after a failure, and reports each (re)subscription.
type pubsub struct {
	c  *client
	ps *goredis.PubSub
	ch <-chan any
}

// pubsubEvent is what a pubsub delivers: a message on a channel, or the
// confirmation that a channel is (again) subscribed.
type pubsubEvent struct {
	subscribed bool // a (re)subscription: messages sent before it are lost
	channel    string
	payload    string
}

// newPubSub opens a subscriber (it connects on first use).
func (c *client) newPubSub() *pubsub {
	ps := c.rdb.Subscribe(context.Background())
	return &pubsub{c: c, ps: ps, ch: ps.ChannelWithSubscriptions(goredis.WithChannelSize(1024))}
}

// subscribe adds channels; after a failure they are still resubscribed
// when the connection comes back.
func (p *pubsub) subscribe(ctx context.Context, channels ...string) error {
	return p.c.classify(ctx, p.ps.Subscribe(ctx, channels...))
}

// unsubscribe drops channels.
func (p *pubsub) unsubscribe(ctx context.Context, channels ...string) error {
	return p.c.classify(ctx, p.ps.Unsubscribe(ctx, channels...))
}

// events delivers what the subscriber receives as raw values for event;
// it is closed once close has taken effect. It must be read until then.
func (p *pubsub) events() <-chan any { return p.ch }

// event reads one value of events.
func (p *pubsub) event(v any) (pubsubEvent, bool) {
	switch m := v.(type) {
	case *goredis.Message:
		return pubsubEvent{channel: m.Channel, payload: m.Payload}, true
	case *goredis.Subscription:
		return pubsubEvent{subscribed: m.Kind == "subscribe", channel: m.Channel}, m.Kind == "subscribe"
	}
	return pubsubEvent{}, false
}

func (p *pubsub) close() error { return p.ps.Close() }

// classify turns an error of the client into jobq's vocabulary:
//
//   - the client was closed (Backend.Close): backend.ErrClosed;
//   - the call timeout ran out, the server could not be reached, the
//     connection broke, or the server cannot serve now (loading, read-only
//     replica, cluster down, out of memory, busy script, refused login):
//     backend.ErrUnavailable, naming the host;
//   - the caller's context ended: its error;
//   - a script refused its input ("jobq: …"): backend.ErrInvalidInput;
//   - anything else: wrapped as is.
//
// ctx is the context the call ran under (after the call timeout).
func (c *client) classify(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, goredis.ErrClosed) {
		return fmt.Errorf("%w: %w", backend.ErrClosed, err)
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var rerr goredis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		if i := strings.Index(msg, "jobq: "); i >= 0 {
			// Scripts refuse input as "jobq: <field>: <reason>".
			field, reason, _ := strings.Cut(msg[i+len("jobq: "):], ": ")
			return &backend.InputError{Field: field, Reason: reason}
		}
		if serverUnavailable(msg) {
			return fmt.Errorf("%w: redis at %s: %w", backend.ErrUnavailable, c.host, err)
		}
		return fmt.Errorf("redis at %s: %w", c.host, err)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, goredis.ErrPoolTimeout) || errors.Is(err, goredis.ErrPoolExhausted) {
		return fmt.Errorf("%w: redis at %s: %w", backend.ErrUnavailable, c.host, err)
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		if netErr.Timeout() {
			return fmt.Errorf("%w: redis at %s did not answer within %s: %w", backend.ErrUnavailable, c.host, c.timeout, err)
		}
		return fmt.Errorf("%w: redis at %s: %w", backend.ErrUnavailable, c.host, err)
	}
	return err
}

// serverUnavailable reports whether a server error means the server
// cannot serve any write now, as opposed to refusing this one command.
func serverUnavailable(msg string) bool {
	for _, p := range []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN", "NOREPLICAS",
		"NOAUTH", "WRONGPASS", "NOPERM", "OOM", "BUSY", "MISCONF", "ERR max number of clients"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// existsField reports whether a hash has a field.
func (c *client) existsField(ctx context.Context, key, field string) (bool, error) {
	ok, err := c.rdb.HExists(ctx, key, field).Result()
	return ok, c.classify(ctx, err)
}

// hgetEach reads field fields[i] of hash keys[i], in one pipeline; a
// missing one reads as "".
func (c *client) hgetEach(ctx context.Context, keys, fields []string) ([]string, error) {
	return c.stringEach(ctx, len(keys), func(ctx context.Context, pipe goredis.Pipeliner, i int) *goredis.StringCmd {
		return pipe.HGet(ctx, keys[i], fields[i])
	})
}

// getEach reads the string keys, in one pipeline (which a cluster client
// splits by node); a missing one reads as "".
func (c *client) getEach(ctx context.Context, keys []string) ([]string, error) {
	return c.stringEach(ctx, len(keys), func(ctx context.Context, pipe goredis.Pipeliner, i int) *goredis.StringCmd {
		return pipe.Get(ctx, keys[i])
	})
}

// stringEach sends the n reads cmd queues, in one pipeline, and returns
// their values; a missing one reads as "".
func (c *client) stringEach(ctx context.Context, n int, cmd func(ctx context.Context, pipe goredis.Pipeliner, i int) *goredis.StringCmd) ([]string, error) {
	pipe := c.rdb.Pipeline()
	cmds := make([]*goredis.StringCmd, n)
	for i := range n {
		cmds[i] = cmd(ctx, pipe, i)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return nil, c.classify(ctx, err)
	}
	out := make([]string, n)
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if err != nil && !errors.Is(err, goredis.Nil) {
			return nil, c.classify(ctx, err)
		}
		out[i] = v
	}
	return out, nil
}

// hmget reads fields of one hash; a missing one reads as "".
func (c *client) hmget(ctx context.Context, key string, fields []string) ([]string, error) {
	v, err := c.rdb.HMGet(ctx, key, fields...).Result()
	if err != nil {
		return nil, c.classify(ctx, err)
	}
	out := make([]string, len(v))
	for i, x := range v {
		out[i], _ = x.(string)
	}
	return out, nil
}
