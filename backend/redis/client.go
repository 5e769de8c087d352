package redis

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/jobq/jobq/backend"
)

// client.go, client_conn.go and client_pubsub.go are the backend's whole
// view of its Redis client (rueidis): script runs, pipelines, the few plain
// commands and the reading of the client's errors (here); the connections
// it dials, what a failed call tells of whether it was sent, and the
// tests' fault hook (client_conn.go); pub/sub (client_pubsub.go). Nothing
// else in the package imports rueidis, so the client can be swapped by
// rewriting these files.

// clientConfig is what a client is made from (see url.go).
type clientConfig struct {
	addrs    []string // one address, or a cluster's seed addresses
	cluster  bool
	username string
	password string
	db       int
	tls      *tls.Config
	poolSize int // 0: 10 per CPU
	timeout  time.Duration
}

// client runs commands with a timeout each and reports failures as errors
// wrapping the backend sentinels (see classify).
type client struct {
	rdb     rueidis.Client
	cluster bool
	host    string // the first address, for error messages
	timeout time.Duration
	dialer  *dialer
	closed  atomic.Bool // rueidis says ErrClosing for a closed client and for a dead connection alike
	// calls in flight beyond the pool's size wait for a connection (see do).
	poolSize int64
	inflight atomic.Int64
	// slots, when set (tests set it), checks that the keys of every
	// script call share one Cluster slot, and counts the calls.
	slots *slotCheck
	// inject, when set (tests set it), breaks calls at this seam (see
	// faultFunc); unset, it costs a call one atomic load.
	inject atomic.Pointer[faultFunc]
}

// newClient connects: rueidis dials at creation (a cluster's topology is
// read then), so an unreachable server or a refused login fails here,
// classified like the failure of any call. Until opened, the end of ctx
// (Open's) fails every network step of the client (see dialer), which
// rueidis.NewClient, taking no context, would not see.
func newClient(ctx context.Context, cfg clientConfig) (*client, error) {
	c := &client{cluster: cfg.cluster, host: cfg.addrs[0], timeout: cfg.timeout, dialer: newDialer(ctx, cfg.timeout)}
	addrs := cfg.addrs
	if !cfg.cluster && len(addrs) > 1 {
		addrs = addrs[:1]
	}
	poolSize := cfg.poolSize
	if poolSize == 0 {
		poolSize = 10 * runtime.GOMAXPROCS(0)
	}
	c.poolSize = int64(poolSize)
	opt := rueidis.ClientOption{
		// A single server is never probed for cluster mode; a cluster
		// follows MOVED/ASK (a redirected command did not run).
		ForceSingleClient: !cfg.cluster,
		ClusterOption:     rueidis.ClusterOption{MaxMovedRedirections: 8},
		Username:          cfg.username,
		Password:          cfg.password,
		SelectDB:          cfg.db,
		TLSConfig:         cfg.tls,
		// Every call takes a connection of its own from this pool.
		// Auto-pipelining is off: once concurrent calls have switched a
		// connection into pipelining mode, a lone call on it became
		// slower than on go-redis, which this client replaced
		// (docs/performance.md, "Why the code is shaped this way").
		DisableAutoPipelining: true,
		BlockingPoolSize:      poolSize,
		// RESP2: the replies of scripts keep their Lua-to-RESP2 shapes.
		AlwaysRESP2:   true,
		DisableCache:  true,
		ClientSetInfo: rueidis.DisableClientSetInfo,
		// No resends: a script whose reply was lost may have run, and
		// running an insert or a claim twice is not harmless. Connection
		// failures surface as ErrUnavailable; callers back off and retry.
		DisableRetry: true,
		// The call timeout: connecting, and writing a command and reading
		// its reply (a socket deadline set on every command), each take
		// at most this long, so a call to a server that stopped answering
		// fails within about that, with ErrUnavailable (classify). A
		// caller's earlier deadline still applies. rueidis bounds the
		// wait for a free connection by the context only, so do gives a
		// timer context to the calls that may wait (more in flight than
		// the pool holds), not to every call: on every call it was a
		// noticeable share of a single enqueue's round trip
		// (docs/performance.md, "Why the code is shaped this way").
		ConnWriteTimeout: cfg.timeout,
		Dialer:           net.Dialer{Timeout: cfg.timeout},
		DialCtxFn:        c.dialer.dial,
	}
	// One seed at a time: given several, rueidis dials them all at once
	// and, when more than one answers, leaves a goroutine behind that
	// closes the extra connections 5 s later, after Close. A cluster
	// client learns every node from the first seed that answers.
	var err error
	for _, a := range addrs {
		opt.InitAddress = []string{a}
		if c.rdb, err = rueidis.NewClient(opt); err == nil {
			return c, nil
		}
		if c.rdb != nil {
			// A single client comes back failed but made.
			c.rdb.Close()
		}
		if ctx.Err() != nil {
			break
		}
	}
	if cfg.tls == nil {
		err = plainOpenError(err)
	}
	err = c.classify(ctx, err)
	c.dialer.opened()
	return nil, err
}

// opened ends the watch of Open's context (see newClient); false means
// that context ended first.
func (c *client) opened() bool { return c.dialer.opened() }

func (c *client) close() error {
	c.closed.Store(true)
	c.rdb.Close()
	return nil
}

// script is one script of scripts.lua, run by EVALSHA and loaded by EVAL
// when the server does not know it (a restart flushes the cache).
type script struct {
	name string
	src  string
	sha  string
}

func newScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
}

// evalCmd builds a run of s: EVALSHA, or EVAL with the source.
func (c *client) evalCmd(s *script, sha bool, keys, args []string) rueidis.Completed {
	if sha {
		return c.rdb.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	}
	return c.rdb.B().Eval().Script(s.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
}

// evalArgs checks a script call and turns its arguments into strings.
// rueidis's command builder for a cluster panics on keys of different
// slots; the server would refuse them (CROSSSLOT), so it is an error here.
func (c *client) evalArgs(s *script, keys []string, args []any) ([]string, error) {
	if err := c.slots.check(s, keys); err != nil {
		return nil, err
	}
	if c.cluster {
		for _, k := range keys[min(1, len(keys)):] {
			if keySlot(k) != keySlot(keys[0]) {
				return nil, fmt.Errorf("redis at %s: script %s: CROSSSLOT keys %q and %q hash to different slots", c.host, s.name, keys[0], k)
			}
		}
	}
	out := make([]string, len(args))
	for i, a := range args {
		v, err := argString(a)
		if err != nil {
			return nil, fmt.Errorf("script %s: argument %d: %w", s.name, i+1, err)
		}
		out[i] = v
	}
	return out, nil
}

// argString writes a script argument as go-redis did, the client this
// package was written for: numbers in decimal, booleans as 1 and 0.
func argString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case int16:
		return strconv.FormatInt(int64(x), 10), nil
	case int8:
		return strconv.FormatInt(int64(x), 10), nil
	case uint:
		return strconv.FormatUint(uint64(x), 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case uint32:
		return strconv.FormatUint(uint64(x), 10), nil
	case uint16:
		return strconv.FormatUint(uint64(x), 10), nil
	case uint8:
		return strconv.FormatUint(uint64(x), 10), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32), nil
	case bool:
		if x {
			return "1", nil
		}
		return "0", nil
	case nil:
		return "", nil
	case time.Time:
		return x.Format(time.RFC3339Nano), nil
	case time.Duration:
		return strconv.FormatInt(int64(x), 10), nil
	case encoding.BinaryMarshaler:
		b, err := x.MarshalBinary()
		return string(b), err
	}
	return "", fmt.Errorf("cannot send %T to redis", v)
}

// eval runs one script.
func (c *client) eval(ctx context.Context, s *script, keys []string, args []any) (any, error) {
	sargs, err := c.evalArgs(s, keys, args)
	if err != nil {
		return nil, &notSentError{err}
	}
	res := c.do(ctx, c.evalCmd(s, true, keys, sargs))
	if isNoScript(res.Error()) {
		// The server refused it unrun: sent again with the source.
		res = c.do(ctx, c.evalCmd(s, false, keys, sargs))
	}
	v, err := res.ToAny()
	return v, c.classify(ctx, err)
}

// evalCall is one script run of evalAll, with its outcome.
type evalCall struct {
	s    *script
	keys []string
	args []any
	res  any
	// err is the call's failure. isNotSent(err) says it never reached the
	// server; any other failure leaves unknown whether it ran.
	err error
}

// evalAll runs calls in one pipeline, in a MULTI/EXEC transaction when
// atomic on a single server (a cluster refuses a transaction over several
// slots, and every call is atomic by itself anyway: it is one script).
// Each call gets its own result or error; evalAll returns the first error.
//
// A call the server refused with NOSCRIPT (its script cache was flushed,
// or the server restarted) did not run, so it is sent again with EVAL:
// alone outside a transaction, and inside one the whole transaction again,
// so that it stays all or nothing. A transaction holding several scripts
// is sent with EVAL from the start: EXEC runs the calls whose scripts the
// server has and refuses the others, and a call then sent again alone
// would not be part of the whole.
func (c *client) evalAll(ctx context.Context, calls []*evalCall, atomic bool) error {
	if len(calls) == 1 {
		calls[0].res, calls[0].err = c.eval(ctx, calls[0].s, calls[0].keys, calls[0].args)
		return calls[0].err
	}
	tx := atomic && !c.cluster
	sargs := make([][]string, len(calls))
	sha := true
	for i, call := range calls {
		a, err := c.evalArgs(call.s, call.keys, call.args)
		if err != nil {
			err = &notSentError{err}
			for _, call := range calls {
				call.res, call.err = nil, err
			}
			return err
		}
		sargs[i] = a
		sha = sha && call.s == calls[0].s
	}
	noScript := c.runCalls(ctx, calls, sargs, tx, sha || !tx)
	switch {
	case len(noScript) == 0:
	case tx && len(noScript) == len(calls):
		c.runCalls(ctx, calls, sargs, true, false)
	case tx:
		// Unreachable: a transaction of one script is refused whole.
		for _, i := range noScript {
			calls[i].err = fmt.Errorf("redis at %s: script %s: refused inside a transaction whose other calls ran: %w", c.host, calls[i].s.name, calls[i].err)
		}
	default:
		again := make([]*evalCall, len(noScript))
		args := make([][]string, len(noScript))
		for j, i := range noScript {
			again[j], args[j] = calls[i], sargs[i]
		}
		c.runCalls(ctx, again, args, false, false)
	}
	for _, call := range calls {
		if call.err != nil {
			return call.err
		}
	}
	return nil
}

// runCalls sends calls (their arguments sargs) in one pipeline, in a
// transaction when tx, by EVALSHA when sha, else with their source, and
// sets each call's result or error. It returns the indexes of the calls
// the server refused with NOSCRIPT, leaving their errors raw.
func (c *client) runCalls(ctx context.Context, calls []*evalCall, sargs [][]string, tx, sha bool) []int {
	cmds := make(rueidis.Commands, 0, len(calls)+2)
	if tx {
		cmds = append(cmds, c.rdb.B().Multi().Build())
	}
	for i, call := range calls {
		cmds = append(cmds, c.evalCmd(call.s, sha, call.keys, sargs[i]))
	}
	if tx {
		cmds = append(cmds, c.rdb.B().Exec().Build())
	}
	resps := c.doMulti(ctx, cmds)
	var results []rueidis.RedisMessage // EXEC's reply, one per call
	var txErr error                    // why there is none
	if tx {
		if txErr = resps[0].Error(); txErr == nil {
			results, txErr = resps[len(resps)-1].ToArray()
			if txErr == nil && len(results) != len(calls) {
				txErr = fmt.Errorf("EXEC replied %d results to %d commands", len(results), len(calls))
			}
		}
		resps = resps[1 : len(resps)-1] // the replies to queueing
	}
	var noScript []int
	for i, call := range calls {
		var res any
		err := resps[i].Error()
		switch {
		case err != nil: // not run (a refused queueing, or no transaction)
		case tx && txErr != nil:
			err = txErr
		case tx:
			res, err = results[i].ToAny()
		default:
			res, err = resps[i].ToAny()
		}
		if isNoScript(err) {
			noScript = append(noScript, i)
			call.res, call.err = nil, err
			continue
		}
		call.res, call.err = res, c.classify(ctx, err)
	}
	return noScript
}

func isNoScript(err error) bool {
	rerr, ok := rueidis.IsRedisErr(err)
	return ok && rerr.IsNoScript()
}

// loadScripts loads every script into the server's script cache (every
// master of a cluster), so that pipelines rarely meet NOSCRIPT.
func (c *client) loadScripts(ctx context.Context, scripts []*script) error {
	for _, n := range c.rdb.Nodes() {
		cmds := make(rueidis.Commands, len(scripts))
		for i, s := range scripts {
			cmds[i] = n.B().ScriptLoad().Script(s.src).Build()
		}
		for _, r := range n.DoMulti(ctx, cmds...) {
			if err := r.Error(); err != nil {
				return c.classify(ctx, err)
			}
		}
	}
	return nil
}

// get returns a string key's value and whether it exists.
func (c *client) get(ctx context.Context, key string) (string, bool, error) {
	v, err := c.do(ctx, c.rdb.B().Get().Key(key).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false, nil
	}
	return v, err == nil, c.classify(ctx, err)
}

// set sets a string key.
func (c *client) set(ctx context.Context, key, value string) error {
	return c.classify(ctx, c.do(ctx, c.rdb.B().Set().Key(key).Value(value).Build()).Error())
}

// incr raises a counter by one.
func (c *client) incr(ctx context.Context, key string) error {
	return c.classify(ctx, c.do(ctx, c.rdb.B().Incr().Key(key).Build()).Error())
}

// hgetAll returns every field of a hash (none when it does not exist).
func (c *client) hgetAll(ctx context.Context, key string) (map[string]string, error) {
	m, err := c.do(ctx, c.rdb.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		return nil, c.classify(ctx, err)
	}
	return m, nil
}

// hmgetAll reads fields of several hashes in one pipeline. A missing
// hash or field reads as nil.
func (c *client) hmgetAll(ctx context.Context, keys []string, fields ...string) ([][]any, error) {
	cmds := make(rueidis.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = c.rdb.B().Hmget().Key(k).Field(fields...).Build()
	}
	out := make([][]any, len(keys))
	for i, r := range c.doAll(ctx, cmds) {
		v, err := r.ToAny()
		if err != nil {
			return nil, c.classify(ctx, err)
		}
		if out[i], err = asSlice(v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// doAll sends cmds in one pipeline (which a cluster client splits by
// node), or alone.
func (c *client) doAll(ctx context.Context, cmds rueidis.Commands) []rueidis.RedisResult {
	if len(cmds) == 1 {
		return []rueidis.RedisResult{c.do(ctx, cmds[0])}
	}
	return c.doMulti(ctx, cmds)
}

// existAll reports which of keys exist, in one pipeline.
func (c *client) existAll(ctx context.Context, keys []string) ([]bool, error) {
	cmds := make(rueidis.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = c.rdb.B().Exists().Key(k).Build()
	}
	out := make([]bool, len(keys))
	for i, r := range c.doAll(ctx, cmds) {
		n, err := r.AsInt64()
		if err != nil {
			return nil, c.classify(ctx, err)
		}
		out[i] = n > 0
	}
	return out, nil
}

// configGet returns the value of one server setting. A server that
// refuses CONFIG (managed services often do) is an error.
func (c *client) configGet(ctx context.Context, name string) (string, error) {
	m, err := c.do(ctx, c.rdb.B().ConfigGet().Parameter(name).Build()).AsStrMap()
	if err != nil {
		return "", c.classify(ctx, err)
	}
	v, ok := m[name]
	if !ok {
		return "", fmt.Errorf("CONFIG GET %s: no such setting", name)
	}
	return v, nil
}

// do runs one command. A connection found dead before the command was
// written to it (checkedConn) failed the call without sending anything,
// so it is made again, on another connection. A failure short of the
// server is a notSentError.
func (c *client) do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	var fc faultCmd
	inject := c.inject.Load()
	if inject != nil {
		fc = describe(cmd)
		if err := (*inject)(fc, false); err != nil {
			return rueidis.NewErrorResult(&notSentError{err})
		}
	}
	if err := ctx.Err(); err != nil {
		return rueidis.NewErrorResult(&notSentError{err})
	}
	ctx, cancel := c.admit(ctx)
	defer c.leave(cancel)
	for i := int64(0); ; i++ {
		// rueidis keeps a command that failed short of the server, for
		// reuse.
		r := c.rdb.Do(ctx, cmd)
		if i < c.poolSize && isStaleConn(r.Error()) {
			continue
		}
		if inject != nil {
			if err := (*inject)(fc, true); err != nil {
				return rueidis.NewErrorResult(err)
			}
		}
		return unsent(r)
	}
}

// doMulti is do for a pipeline; the commands that met a dead connection
// (all of a transaction) are sent again.
func (c *client) doMulti(ctx context.Context, cmds rueidis.Commands) []rueidis.RedisResult {
	var fcs []faultCmd
	inject := c.inject.Load()
	if inject != nil {
		fcs = make([]faultCmd, len(cmds))
		for i, cmd := range cmds {
			fcs[i] = describe(cmd)
		}
		for _, fc := range fcs {
			if err := (*inject)(fc, false); err != nil {
				return failAll(len(cmds), &notSentError{err})
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return failAll(len(cmds), &notSentError{err})
	}
	ctx, cancel := c.admit(ctx)
	defer c.leave(cancel)
	resps := c.rdb.DoMulti(ctx, cmds...)
	for range c.poolSize {
		var again []int
		for i, r := range resps {
			if isStaleConn(r.Error()) {
				again = append(again, i)
			}
		}
		if len(again) == 0 {
			break
		}
		retry := make(rueidis.Commands, len(again))
		for j, i := range again {
			retry[j] = cmds[i]
		}
		for j, r := range c.rdb.DoMulti(ctx, retry...) {
			resps[again[j]] = r
		}
	}
	for i, fc := range fcs {
		if err := (*inject)(fc, true); err != nil {
			for j := i; j < len(resps); j++ {
				resps[j] = rueidis.NewErrorResult(err)
			}
			break
		}
	}
	for i, r := range resps {
		resps[i] = unsent(r)
	}
	return resps
}

// failAll is the outcome of n commands that all failed with err.
func failAll(n int, err error) []rueidis.RedisResult {
	out := make([]rueidis.RedisResult, n)
	for i := range out {
		out[i] = rueidis.NewErrorResult(err)
	}
	return out
}

// admit counts a call in flight and, when more are in flight than the
// pool holds (so this one may wait for a connection, which rueidis bounds
// by the context only), gives it the call timeout. A try that meets a dead
// connection discards it, so a call meets at most the pool's size of them
// in a row (after a restart of the server every idle one is).
func (c *client) admit(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.inflight.Add(1) <= c.poolSize {
		return ctx, nil
	}
	return context.WithTimeout(ctx, c.timeout)
}

// leave ends what admit began.
func (c *client) leave(cancel context.CancelFunc) {
	if cancel != nil {
		cancel()
	}
	c.inflight.Add(-1)
}

// ping checks that the server answers.
func (c *client) ping(ctx context.Context) error {
	return c.classify(ctx, c.do(ctx, c.rdb.B().Ping().Build()).Error())
}

// classify turns an error of the client into jobq's vocabulary:
//
//   - the client was closed (Backend.Close): backend.ErrClosed;
//   - the call timeout ran out, the server could not be reached, the
//     connection broke, or the server cannot serve now (loading, read-only
//     replica, cluster down, out of memory, busy script, refused login):
//     backend.ErrUnavailable, naming the host;
//   - a failed TLS handshake, or a first reply that suggests a TLS port
//     (connError): backend.ErrUnavailable with its hint, even when the
//     caller's deadline cut it short;
//   - the caller's context ended: its error, except that a deadline
//     that ends Open is backend.ErrUnavailable too;
//   - a script refused its input ("jobq: …"): backend.ErrInvalidInput;
//   - anything else: wrapped as is.
//
// ctx is the caller's context of the call.
func (c *client) classify(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var ns *notSentError
	if errors.As(err, &ns) {
		return &notSentError{c.classify(ctx, ns.err)}
	}
	if c.closed.Load() && (errors.Is(err, rueidis.ErrClosing) || errors.Is(err, rueidis.ErrDedicatedClientRecycled)) {
		return fmt.Errorf("%w: %w", backend.ErrClosed, err)
	}
	var ce *connError
	if errors.As(err, &ce) {
		// Its hint says more than the context's end that cut it short.
		return fmt.Errorf("%w: redis at %s: %w", backend.ErrUnavailable, c.host, err)
	}
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && c.dialer.isOpening() {
			// Open's caller gave the server this long: to Open, no answer
			// in time is a server unavailable, as with the call timeout.
			return fmt.Errorf("%w: redis at %s did not answer before the deadline: %w", backend.ErrUnavailable, c.host, context.Cause(ctx))
		}
		return context.Cause(ctx)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// rueidis says so when the caller's deadline, earlier than the
		// call timeout, ran out on the socket a moment before ctx did.
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			return context.DeadlineExceeded
		}
	}
	if rerr, ok := rueidis.IsRedisErr(err); ok {
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
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, rueidis.ErrClosing) || errors.Is(err, rueidis.ErrNoAddr) {
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
	n, err := c.do(ctx, c.rdb.B().Hexists().Key(key).Field(field).Build()).AsInt64()
	return n == 1, c.classify(ctx, err)
}

// hgetEach reads field fields[i] of hash keys[i], in one pipeline; a
// missing one reads as "".
func (c *client) hgetEach(ctx context.Context, keys, fields []string) ([]string, error) {
	return c.stringEach(ctx, len(keys), func(i int) rueidis.Completed {
		return c.rdb.B().Hget().Key(keys[i]).Field(fields[i]).Build()
	})
}

// getEach reads the string keys, in one pipeline (which a cluster client
// splits by node); a missing one reads as "".
func (c *client) getEach(ctx context.Context, keys []string) ([]string, error) {
	return c.stringEach(ctx, len(keys), func(i int) rueidis.Completed {
		return c.rdb.B().Get().Key(keys[i]).Build()
	})
}

// stringEach sends the n reads cmd builds, in one pipeline, and returns
// their values; a missing one reads as "".
func (c *client) stringEach(ctx context.Context, n int, cmd func(i int) rueidis.Completed) ([]string, error) {
	if n == 0 {
		return []string{}, nil
	}
	cmds := make(rueidis.Commands, n)
	for i := range n {
		cmds[i] = cmd(i)
	}
	out := make([]string, n)
	for i, r := range c.doAll(ctx, cmds) {
		v, err := r.ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			return nil, c.classify(ctx, err)
		}
		out[i] = v
	}
	return out, nil
}

// hmget reads fields of one hash; a missing one reads as "".
func (c *client) hmget(ctx context.Context, key string, fields []string) ([]string, error) {
	v, err := c.do(ctx, c.rdb.B().Hmget().Key(key).Field(fields...).Build()).ToAny()
	if err != nil {
		return nil, c.classify(ctx, err)
	}
	vs, err := asSlice(v)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(vs))
	for i, x := range vs {
		out[i], _ = x.(string)
	}
	return out, nil
}
