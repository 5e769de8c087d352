package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/redis/redistest"
)

// logs records what a Backend logs.
type logs struct {
	mu   sync.Mutex
	recs []string // "LEVEL message"
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logs) WithGroup(string) slog.Handler            { return l }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Level.String()+" "+r.Message)
	return nil
}

func (l *logs) warnings() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		if strings.HasPrefix(r, "WARN ") {
			out = append(out, r)
		}
	}
	return out
}

// keysUnder lists the keys of a prefix on the server at url.
func keysUnder(t *testing.T, url, prefix string) []string {
	t.Helper()
	keys, err := redistest.Keys(t.Context(), url, prefix)
	if err != nil {
		t.Fatalf("list keys of %s: %v", prefix, err)
	}
	return keys
}

// TestOpenExisting: Existing opens only a prefix holding the layout
// marker, and creates nothing when it refuses (through Open and through
// backend.OpenWith, whose opener passes it on); a newer layout is refused
// both ways.
func TestOpenExisting(t *testing.T) {
	url := testURL(t)
	prefix := redistest.Prefix(t, url)
	withPrefix := withParam(url, "key_prefix", prefix)
	for _, open := range []func() (backend.Backend, error){
		func() (backend.Backend, error) {
			return Open(t.Context(), url, Options{KeyPrefix: prefix, Existing: true, Logger: quiet})
		},
		func() (backend.Backend, error) {
			return backend.OpenWith(t.Context(), withPrefix, backend.OpenOptions{Existing: true})
		},
	} {
		b, err := open()
		if err == nil {
			_ = b.Close()
			t.Fatal("Open with Existing on an empty prefix succeeded")
		}
		if !errors.Is(err, backend.ErrNoSchema) || !strings.Contains(err.Error(), prefix) {
			t.Fatalf("Open with Existing: %v; want ErrNoSchema naming the prefix", err)
		}
		wantLayoutError(t, err, 0)
	}
	if keys := keysUnder(t, url, prefix); len(keys) != 0 {
		t.Fatalf("a refused Existing open left keys %v", keys)
	}

	// An ordinary open writes the marker; then Existing opens, and reads
	// what the first backend wrote.
	b := openTest(t, Options{KeyPrefix: prefix})
	id := insertJob(t, b, "q")
	ro := openURL(t, url, Options{KeyPrefix: prefix, Existing: true, Logger: quiet})
	if row, err := ro.JobGet(t.Context(), id); err != nil || row.Queue != "q" {
		t.Fatalf("JobGet through the Existing open = %+v, %v", row, err)
	}
	if v, err := b.Migrate(t.Context()); err != nil || v != LayoutVersion {
		t.Fatalf("Migrate = %d, %v; want %d", v, err, LayoutVersion)
	}

	c, err := redistest.Client(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	setSchema := func(v string) error {
		return c.Do(t.Context(), c.B().Set().Key(prefix+":schema").Value(v).Build()).Error()
	}

	// Layouts 2 (before the ready list), 3 (before claim tokens), 4
	// (before the ready set in claim order), 5 (before workflows), 6
	// (before the failed jobs' index), 7 (before keys) and 9 (before
	// deadlines) are raised in place, but a build must be kept from
	// reading a prefix of
	// a layout it does not know: Existing refuses it, pointing at
	// migrate, which moves the ready jobs (TestMigrateLayout4), raises
	// the marker and keeps the jobs.
	for _, old := range []string{"2", "3", "4", "5", "6", "7", "9"} {
		if err := setSchema(old); err != nil {
			t.Fatal(err)
		}
		_, err := Open(t.Context(), url, Options{KeyPrefix: prefix, Existing: true, Logger: quiet})
		if !errors.Is(err, backend.ErrNoSchema) {
			t.Fatalf("Existing open of layout %s: %v; want ErrNoSchema", old, err)
		}
		wantLayoutError(t, err, int(old[0]-'0'))
		if v, err := b.Migrate(t.Context()); err != nil || v != LayoutVersion {
			t.Fatalf("Migrate of layout %s = %d, %v; want %d", old, v, err, LayoutVersion)
		}
		if got, _ := c.Do(t.Context(), c.B().Get().Key(prefix+":schema").Build()).ToString(); got != fmt.Sprint(LayoutVersion) {
			t.Fatalf("marker after Migrate of layout %s = %q; want %d", old, got, LayoutVersion)
		}
		if row, err := ro.JobGet(t.Context(), id); err != nil || row.Queue != "q" {
			t.Fatalf("JobGet after the upgrade from layout %s = %+v, %v", old, row, err)
		}
	}

	// A layout from a newer jobq is refused, with and without Existing.
	if err := setSchema(fmt.Sprint(LayoutVersion + 1)); err != nil {
		t.Fatal(err)
	}
	for _, existing := range []bool{true, false} {
		_, err := Open(t.Context(), url, Options{KeyPrefix: prefix, Existing: existing, Logger: quiet})
		if !errors.Is(err, backend.ErrSchemaTooNew) {
			t.Fatalf("Open(Existing %t) of a newer layout: %v; want ErrSchemaTooNew", existing, err)
		}
		wantLayoutError(t, err, LayoutVersion+1)
	}
	_, err = b.Migrate(t.Context())
	if !errors.Is(err, backend.ErrSchemaTooNew) {
		t.Fatalf("Migrate of a newer layout: %v; want ErrSchemaTooNew", err)
	}
	wantLayoutError(t, err, LayoutVersion+1)
}

// wantLayoutError fails the test unless err is a *backend.SchemaError at
// layout have, wanting this build's layout, and free of command-line
// advice: which command fixes the prefix is for the caller (the jobq
// command) to say, not the library.
func wantLayoutError(t *testing.T, err error, have int) {
	t.Helper()
	var se *backend.SchemaError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is no *backend.SchemaError", err, err)
	}
	if se.Have != have || se.Want != LayoutVersion {
		t.Errorf("SchemaError = %+v; want Have %d, Want %d", *se, have, LayoutVersion)
	}
	if strings.Contains(err.Error(), "jobq migrate") {
		t.Errorf("error %q gives command-line advice", err)
	}
}

// withParam adds a query parameter to a URL.
func withParam(url, key, value string) string {
	if strings.Contains(url, "?") {
		return url + "&" + key + "=" + value
	}
	return url + "?" + key + "=" + value
}

// insertJob inserts one job into queue and returns its ID.
func insertJob(t *testing.T, b *Backend, queue string) int64 {
	t.Helper()
	res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{{Queue: queue, Type: "t", Payload: []byte(`{}`), MaxAttempts: 3}})
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	return res[0].ID
}

// TestOpenOptions: the URL's key prefix and Options' must agree; bad
// options are refused as invalid input before connecting.
func TestOpenOptions(t *testing.T) {
	for _, tc := range []struct {
		url   string
		opts  Options
		field string
	}{
		{"redis://127.0.0.1:1?key_prefix=a", Options{KeyPrefix: "b"}, "key prefix"},
		{"redis://127.0.0.1:1", Options{KeyPrefix: "bad{prefix}"}, "key prefix"},
		{"redis://127.0.0.1:1", Options{Timeout: -time.Second}, "timeout"},
		{"redis://127.0.0.1:1", Options{PoolSize: -1}, "pool size"},
	} {
		_, err := Open(t.Context(), tc.url, tc.opts)
		var ie *backend.InputError
		if !errors.As(err, &ie) || ie.Field != tc.field {
			t.Errorf("Open(%s, %+v) = %v; want an InputError on %q", tc.url, tc.opts, err, tc.field)
		}
	}
}

// TestOpenUnavailable: a server that is not there is ErrUnavailable
// naming the address, quickly, without the password.
func TestOpenUnavailable(t *testing.T) {
	srv := redistest.StartServer(t)
	srv.Stop() // its port is free now
	url := fmt.Sprintf("redis://:s3cret-pw@127.0.0.1:%d/0", srv.Port)
	start := time.Now()
	_, err := Open(t.Context(), url, Options{Logger: quiet})
	if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d", srv.Port)) {
		t.Fatalf("Open of a stopped server: %v; want ErrUnavailable naming the address", err)
	}
	if strings.Contains(err.Error(), "s3cret-pw") {
		t.Fatalf("error shows the password: %v", err)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("Open of a stopped server took %s", took)
	}
}

// TestPersistenceWarning: one warning at open when the server keeps
// nothing (or only snapshots), none with AOF on, none when CONFIG is
// refused (managed services).
func TestPersistenceWarning(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string // "" for no warning
	}{
		{"Off", nil, "persistence is off"},
		{"SnapshotsOnly", []string{"--save", "3600 1"}, "only snapshots persist"},
		{"AOF", []string{"--appendonly", "yes"}, ""},
		{"ConfigRefused", []string{"--rename-command", "CONFIG", ""}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartServer(t, tc.args...)
			var rec logs
			b := openURL(t, srv.URL, Options{Logger: slog.New(&rec)})
			_ = b
			w := rec.warnings()
			switch {
			case tc.want == "" && len(w) != 0:
				t.Fatalf("warnings %q, want none", w)
			case tc.want != "" && (len(w) != 1 || !strings.Contains(w[0], tc.want)):
				t.Fatalf("warnings %q, want one saying %q", w, tc.want)
			}
		})
	}
}

// TestServerRestart: while the server is down calls fail with
// ErrUnavailable; once it is back the same Backend works again, its
// scripts reloaded (a restart empties the script cache) in single calls
// and in pipelines.
func TestServerRestart(t *testing.T) {
	srv := redistest.StartServer(t, "--appendonly", "yes", "--appendfsync", "always")
	b := openURL(t, srv.URL, Options{Logger: quiet, Timeout: 2 * time.Second})
	id := insertJob(t, b, "q")
	srv.Stop()
	if _, err := b.JobInsertMany(t.Context(), []backend.InsertParams{{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}}); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("insert with the server down: %v; want ErrUnavailable", err)
	}
	srv.Start()
	var err error
	deadline := time.Now().Add(time.Minute)
	for {
		// A batch over two queues runs as a pipeline of scripts.
		_, err = b.JobInsertMany(t.Context(), []backend.InsertParams{
			{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1},
			{Queue: "other", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1},
		})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("insert after the restart: %v", err)
	}
	rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q", "other"}, Max: 10, Lease: time.Minute})
	if err != nil || len(rows) != 3 || rows[0].ID != id {
		t.Fatalf("claim after the restart = %d rows, %v; want 3, the job from before the restart first", len(rows), err)
	}
}

// TestServerPaused: a server that keeps the connection but answers
// nothing makes a call fail with ErrUnavailable, saying so, within the
// call timeout (plus the time to notice); once it answers again the same
// Backend works.
func TestServerPaused(t *testing.T) {
	srv := redistest.StartServer(t)
	const timeout = time.Second
	b := openURL(t, srv.URL, Options{Logger: quiet, Timeout: timeout})
	insertJob(t, b, "q")
	srv.Pause()
	paused := true
	defer func() {
		if paused {
			srv.Resume()
		}
	}()
	start := time.Now()
	_, err := b.JobInsertMany(t.Context(), []backend.InsertParams{{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1}})
	took := time.Since(start)
	if !errors.Is(err, backend.ErrUnavailable) || !strings.Contains(err.Error(), "did not answer within 1s") {
		t.Fatalf("insert into a paused server: %v; want ErrUnavailable saying it did not answer within 1s", err)
	}
	// The upper side allows for a loaded machine; the lower side is the point.
	if took < timeout || took > 10*timeout {
		t.Fatalf("insert into a paused server failed after %s; want about the call timeout, %s", took, timeout)
	}
	srv.Resume()
	paused = false
	var n int
	deadline := time.Now().Add(time.Minute)
	for {
		rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 10, Lease: time.Minute})
		if err == nil {
			n = len(rows)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("claim after the server resumed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The insert may have reached the server before it froze: one job or two.
	if n < 1 || n > 2 {
		t.Fatalf("claimed %d jobs after the server resumed; want the first job (and the timed-out insert's, if it ran)", n)
	}
}
