package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/admin"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/httpserve"
	"github.com/jobq/jobq/metrics"
)

// envAdminTokens holds tokens for 'jobq serve', comma-separated.
const envAdminTokens = "JOBQ_ADMIN_TOKENS"

type serveFlags struct {
	addr      string
	tokens    []string
	tokenFile string
	worker    bool
	prefix    string
	maskKeys  []string
	maxBody   int64
	hosts     []string
	secure    bool
	readLimit time.Duration
	w         workerFlags // with --worker; its log flags and shutdown timeout always
}

func (a *app) newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the admin HTTP API and dashboard (and, with --worker, run a worker)",
		Long: `Serve the admin HTTP API (JSON under /api/v1, described at
/api/v1/openapi.json) and the dashboard on --addr until SIGTERM or Ctrl-C,
then let requests in flight finish for up to --shutdown-timeout. With
--worker it also runs a worker in the same process, with the flags of
'jobq worker', and creates the --db store if needed; without it, the store
must exist (a mistyped --db is reported, not served empty).

Tokens are written scope:secret, scope one of read, enqueue, admin (each
includes the ones before it), the secret at least 16 characters: e.g.
admin:$(openssl rand -hex 16). A bare secret is refused. They come from
--token (repeatable; visible to other users in the process list), from
--token-file (one a line, # starts a comment) and from $JOBQ_ADMIN_TOKENS
(comma-separated); all of them are accepted. Without any token every
request is allowed, so --addr must then be a loopback address, and only
requests addressed to a loopback name (localhost, 127.0.0.1, [::1]) are
answered: a web page whose name an attacker points at 127.0.0.1 (DNS
rebinding) cannot drive the server through its visitor's browser. Name
your own aliases with --allowed-hosts; with tokens, --allowed-hosts
restricts the names answered to these and the loopback ones. Tokens are
never logged.

Behind a proxy that terminates TLS, add --secure-cookies so the
dashboard's login cookie is only ever sent over HTTPS.

--metrics-addr serves Prometheus metrics on /metrics, with /healthz and
/readyz, on an address of its own. With --worker it serves what 'jobq
worker --metrics-addr' does: the worker's counters and, unless
--metrics-depth=false, the queue depths of --db. Without --worker it
serves the queue depths of --db alone, as 'jobq metrics' does, read at
most once per --metrics-cache. The other worker flags (--queues,
--concurrency, --metrics-depth, ...) only apply with --worker.`,
		Example: `  jobq serve --token-file tokens --addr 0.0.0.0:8080 --metrics-addr 127.0.0.1:9090
  jobq serve --worker --queues default,mail --metrics-addr 127.0.0.1:9090`,
		Args: exactArgs(0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runServe(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen on this address")
	fl.StringArrayVar(&f.tokens, "token", nil, "accept this token, scope:secret (repeatable)")
	fl.StringVar(&f.tokenFile, "token-file", "", "accept the tokens in this file, one scope:secret a line")
	fl.BoolVar(&f.worker, "worker", false, "also run a worker in this process (see 'jobq worker --help' for its flags)")
	fl.StringVar(&f.prefix, "prefix", "", "serve under this path, e.g. /admin (behind a proxy that forwards it)")
	fl.StringSliceVar(&f.maskKeys, "mask-keys", admin.DefaultMaskKeys, "payload and metadata keys whose values are shown as *** (a key is masked when its name contains one; these replace the defaults)")
	fl.Int64Var(&f.maxBody, "max-body", 1<<20, "largest request body in bytes; larger ones get 413")
	fl.StringSliceVar(&f.hosts, "allowed-hosts", nil, "host names (or addresses) requests may be addressed to, besides localhost, 127.0.0.1 and [::1] (comma-separated or repeated)")
	fl.BoolVar(&f.secure, "secure-cookies", false, "mark the login cookie Secure (HTTPS only): set it behind a proxy that terminates TLS")
	fl.DurationVar(&f.readLimit, "read-timeout", httpserve.DefaultReadTimeout, "longest time to read a request, body included; a slower client is cut off")
	f.w.add(cmd)
	return cmd
}

// workerOnlyFlags are the worker flags that mean nothing without --worker:
// all of 'jobq worker's but the log flags, the shutdown timeout and the
// metrics address and cache, which the server uses too (without a worker
// its metrics are the queue depths; see runServe).
func workerOnlyFlags() map[string]bool {
	scratch := &cobra.Command{}
	var wf workerFlags
	wf.add(scratch)
	names := map[string]bool{}
	scratch.Flags().VisitAll(func(fl *pflag.Flag) { names[fl.Name] = true })
	for _, shared := range []string{"log-format", "log-level", "json-logs", "shutdown-timeout", "metrics-addr", "metrics-cache"} {
		delete(names, shared)
	}
	return names
}

// check refuses what cannot work, by flag name, before anything opens.
func (f *serveFlags) check(cmd *cobra.Command) ([]admin.Token, error) {
	if !f.worker {
		var stray []string
		only := workerOnlyFlags()
		cmd.Flags().Visit(func(fl *pflag.Flag) {
			if only[fl.Name] {
				stray = append(stray, "--"+fl.Name)
			}
		})
		if len(stray) > 0 {
			return nil, usagef("%s only applies with --worker (add --worker to run one in this process)", strings.Join(stray, ", "))
		}
		if cmd.Flags().Changed("metrics-cache") && f.w.metricsAddr == "" {
			return nil, usagef("--metrics-cache only applies with --metrics-addr")
		}
		if err := positive(cmd, "metrics-cache", f.w.metricsCache); err != nil {
			return nil, err
		}
	}
	if f.prefix != "" && (!strings.HasPrefix(f.prefix, "/") || strings.HasSuffix(f.prefix, "/") || strings.ContainsAny(f.prefix, "?#{} ")) {
		return nil, usagef("--prefix %q: use a path such as /admin (leading slash, no trailing one)", f.prefix)
	}
	if f.maxBody < 1024 {
		return nil, usagef("--max-body %d: use at least 1024 bytes", f.maxBody)
	}
	if f.readLimit < time.Second {
		return nil, usagef("--read-timeout %s: use at least 1s", f.readLimit)
	}
	tokens, err := f.readTokens()
	if err != nil {
		return nil, err
	}
	host, _, err := net.SplitHostPort(f.addr)
	if err != nil {
		return nil, usagef("--addr %q: use host:port, e.g. 127.0.0.1:8080", f.addr)
	}
	if len(tokens) == 0 && !loopback(host) {
		return nil, usagef("--addr %s is not loopback and no token is set: add --token-file (or --token, $%s) or bind 127.0.0.1", f.addr, envAdminTokens)
	}
	if len(tokens) == 0 && slices.Contains(f.hosts, "*") {
		return nil, usagef("--allowed-hosts '*' without a token would let any web page its visitor opens drive this server: name the hosts, or add --token-file")
	}
	for _, h := range f.hosts {
		if h == "" || (h != "*" && strings.ContainsAny(h, "/?#@ ")) {
			return nil, usagef("--allowed-hosts %q: give host names or addresses, such as jobq.internal or 10.0.0.5, without scheme or path", h)
		}
	}
	return tokens, nil
}

// loopback reports whether host names only this machine: a loopback IP or
// "localhost". An empty host (":8080") is every interface.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// readTokens gathers the tokens of --token, --token-file and
// $JOBQ_ADMIN_TOKENS. Errors say where a bad token is, never what it is.
func (f *serveFlags) readTokens() ([]admin.Token, error) {
	var out []admin.Token
	add := func(where, s string) error {
		t, err := admin.ParseToken(s)
		if err != nil {
			return usagef("%s: %v", where, err)
		}
		out = append(out, t)
		return nil
	}
	for i, s := range f.tokens {
		if err := add(fmt.Sprintf("--token #%d", i+1), s); err != nil {
			return nil, err
		}
	}
	if env := os.Getenv(envAdminTokens); strings.TrimSpace(env) != "" {
		for i, s := range strings.Split(env, ",") {
			if strings.TrimSpace(s) == "" {
				continue
			}
			if err := add(fmt.Sprintf("$%s item %d", envAdminTokens, i+1), s); err != nil {
				return nil, err
			}
		}
	}
	if f.tokenFile != "" {
		file, err := os.Open(f.tokenFile)
		if err != nil {
			return nil, usagef("--token-file: %v", err)
		}
		defer file.Close()
		sc := bufio.NewScanner(file)
		for line := 1; sc.Scan(); line++ {
			s := strings.TrimSpace(sc.Text())
			if s == "" || strings.HasPrefix(s, "#") {
				continue
			}
			if err := add(fmt.Sprintf("--token-file %s line %d", f.tokenFile, line), s); err != nil {
				return nil, err
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("read --token-file %s: %w", f.tokenFile, err)
		}
		if len(out) == 0 {
			return nil, usagef("--token-file %s holds no token: write one scope:secret a line", f.tokenFile)
		}
	}
	return out, nil
}

// runServe serves until the command's context is cancelled, with the
// worker beside it when asked; the first to fail stops the other.
func (a *app) runServe(cmd *cobra.Command, f serveFlags) error {
	tokens, err := f.check(cmd)
	if err != nil {
		return err
	}
	log, err := a.logger(cmd, f.w.log)
	if err != nil {
		return err
	}
	var wcfg jobq.WorkerConfig
	if f.worker {
		if wcfg, err = f.w.config(cmd); err != nil {
			return err
		}
		wcfg.Logger = log
	} else if err := positive(cmd, "shutdown-timeout", f.w.shutdownTimeout); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	// Serving alone opens only an existing store, as stats and failed do:
	// a mistyped --db is reported, not served empty. With --worker it
	// creates one, as 'jobq worker' does.
	mode := existingOnly
	if f.worker {
		mode = mayCreate
	}
	return a.withBackend(ctx, mode, func(b backend.Backend) error {
		client, err := jobq.NewClient(b, jobq.ClientConfig{})
		if err != nil {
			return err
		}
		h, err := admin.New(admin.Options{
			Client: client, Inspector: jobq.NewInspector(b), Tokens: tokens,
			MaskKeys: f.maskKeys, MaxBody: f.maxBody, Prefix: f.prefix, Logger: log,
			AllowedHosts: f.hosts, SecureCookies: f.secure,
			Sample: ctx, // the chart covers the whole time serve runs
		})
		if err != nil {
			return err
		}
		if !f.worker && f.w.metricsAddr != "" {
			// Without a worker, the metrics are the queue depths, as
			// 'jobq metrics' serves them; with one, workOn serves its own.
			served, err := a.serveDepths(ctx, f.w, b, log)
			if err != nil {
				return err
			}
			defer func() {
				cancel()
				<-served
			}()
		}
		l, err := net.Listen("tcp", f.addr)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		log.Info("jobq serve", "url", "http://"+l.Addr().String()+f.prefix+"/", "db", backend.RedactURL(a.db), "tokens", len(tokens), "worker", f.worker)
		// The headers go on every answer, the ones outside --prefix too.
		srv := httpserve.New(admin.SecurityHeaders(mount(f.prefix, h)), f.readLimit, slog.NewLogLogger(log.Handler(), slog.LevelWarn))
		done := make(chan error, 2)
		go func() { done <- httpserve.Until(ctx, srv, l, f.w.shutdownTimeout, "admin") }()
		running := 1
		if f.worker {
			running++
			go func() { done <- a.workOn(ctx, b, wcfg, f.w) }()
		}
		var first error
		for range running {
			if err := <-done; err != nil && first == nil {
				first = err
			}
			cancel() // one stopped: stop the other
		}
		return first
	})
}

// serveDepths serves the queue depths of b on f.metricsAddr until ctx ends;
// served is closed once that server has stopped.
func (a *app) serveDepths(ctx context.Context, f workerFlags, b backend.Backend, log *slog.Logger) (served <-chan struct{}, err error) {
	met, err := metrics.New(metrics.Options{StatsCache: f.metricsCache, Logger: log})
	if err != nil {
		return nil, err
	}
	if err := met.ObserveQueues(jobq.NewInspector(b)); err != nil {
		return nil, err
	}
	return a.serveMetrics(ctx, f.metricsAddr, met, b, log)
}

// mount serves h under prefix, as an application would with
// http.StripPrefix.
func mount(prefix string, h http.Handler) http.Handler {
	if prefix == "" {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", http.StripPrefix(prefix, h))
	mux.Handle(prefix, http.RedirectHandler(prefix+"/", http.StatusMovedPermanently))
	return mux
}
