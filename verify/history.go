package verify

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The history is a directory of text files, one per worker process (and
// one per in-process worker on the memory backend) plus the verifier's
// own. Each line is one event:
//
//	<monotonic ns> <event> proc=<name> key=value … wall=<RFC 3339>
//
// The monotonic time is CLOCK_MONOTONIC, comparable across the processes
// of one machine; the wall time is the writer's (with its skew, if any)
// and only informs. Files are opened O_APPEND and every line is one
// write(2), written before the step it records returns (the handler's end
// before the handler returns), so a SIGKILL loses nothing already
// recorded and lines of concurrent goroutines never interleave.

// Events a worker writes.
const (
	evUp        = "up"        // the worker started: pid, skew
	evDown      = "down"      // the worker stopped gracefully
	evClaim     = "claim"     // a claim returned this job: job, att, tok
	evStart     = "start"     // the handler started: job, seq, att, tok
	evEnd       = "end"       // the handler returned: job, att, tok, res
	evWritten   = "written"   // the backend applied the attempt's outcome: kind
	evStale     = "stale"     // the backend refused it (the fence)
	evWriteErr  = "werr"      // a write of the outcome failed and is retried: op
	evRescued   = "rescued"   // this worker's sweep moved the job: failed
	evAbandoned = "abandoned" // the result was dropped: the worker had stopped
)

// Events the verifier writes.
const (
	evSpawn       = "spawn"         // a worker process started: pid, slot
	evExit        = "exit"          // it exited: pid, status, killed
	evKill        = "kill"          // SIGKILL sent: pid
	evPause       = "pause"         // SIGSTOP sent: pid
	evResume      = "resume"        // SIGCONT sent: pid
	evCut         = "cut"           // the proxy cut its connections: conns
	evBlackhole   = "blackhole"     // the proxy stopped forwarding
	evHeal        = "heal"          // it forwards again: mode (resume, cut)
	evLatency     = "latency"       // it delays each chunk: d
	evBrokerDown  = "broker-down"   // the private broker was killed
	evBrokerUp    = "broker-up"     // and answers again
	evEnqueueFail = "enqueue-error" // a batch failed and is sent again: seq, n
)

// Results an end line records: how the handler's attempt ended.
const (
	resOK        = "ok"
	resError     = "error"     // a transient failure on purpose
	resPermanent = "permanent" // a permanent failure on purpose
	resLeaseLost = "lease-lost"
	resShutdown  = "shutdown"
	resCancelled = "cancelled"
	resTimeout   = "timeout"
	resOther     = "other"
)

// historyFile names the history file of proc in dir.
func historyFile(dir, proc string) string { return filepath.Join(dir, proc+".log") }

// historyWriter appends one process's (or in-process worker's) events to
// its file. It is safe for concurrent use: every line is one write to an
// O_APPEND file.
type historyWriter struct {
	f    *os.File
	proc string
	pid  int64 // the writing process's ID, on the attempts' lines
	skew time.Duration

	mu  sync.Mutex
	err error // the first write error
}

// createHistory creates the history file at path; skew shifts the wall
// times it writes.
func createHistory(path, proc string, skew time.Duration) (*historyWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create history file: %w", err)
	}
	return &historyWriter{f: f, proc: proc, pid: int64(os.Getpid()), skew: skew}, nil
}

// field is one key=value of a line; values never hold spaces.
type field struct {
	k string
	v string
	n int64
	s bool // v is the value (a string); otherwise n
}

func str(k, v string) field       { return field{k: k, v: v, s: true} }
func num(k string, n int64) field { return field{k: k, n: n} }

// write appends one line for event ev, now.
func (h *historyWriter) write(ev string, fields ...field) { h.writeAt(monoNow(), ev, fields...) }

// writeAt appends one line for event ev at monotonic time mono.
func (h *historyWriter) writeAt(mono int64, ev string, fields ...field) {
	b := make([]byte, 0, 160)
	b = strconv.AppendInt(b, mono, 10)
	b = append(b, ' ')
	b = append(b, ev...)
	b = append(b, " proc="...)
	b = append(b, h.proc...)
	for _, f := range fields {
		b = append(b, ' ')
		b = append(b, f.k...)
		b = append(b, '=')
		if f.s {
			b = append(b, noSpaces(f.v)...)
		} else {
			b = strconv.AppendInt(b, f.n, 10)
		}
	}
	b = append(b, " wall="...)
	b = time.Now().Add(h.skew).UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '\n')
	if _, err := h.f.Write(b); err != nil {
		h.mu.Lock()
		if h.err == nil {
			h.err = fmt.Errorf("write history %s: %w", h.f.Name(), err)
		}
		h.mu.Unlock()
	}
}

// noSpaces keeps a value one field: spaces and line breaks become '_'.
func noSpaces(s string) string {
	if !strings.ContainsAny(s, " \t\r\n") {
		return s
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\r', '\n':
			return '_'
		}
		return r
	}, s)
}

// Err is the first write that failed, if any: the history is then
// incomplete and the verdict unreliable.
func (h *historyWriter) Err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// Close closes the file.
func (h *historyWriter) Close() error {
	if err := h.f.Close(); err != nil {
		return fmt.Errorf("close history %s: %w", h.f.Name(), err)
	}
	return h.Err()
}

// record is one parsed line.
type record struct {
	mono int64
	ev   string
	proc string
	job  int64
	seq  int64 // -1 when the line has none
	att  int
	tok  int64
	// val is the line's one word of detail: res (end), kind (written),
	// op (werr), status (exit), mode (heal).
	val   string
	pid   int64
	extra map[string]string // the other fields, by key
	src   string            // file:line
	line  string
}

// get returns the value of key, "" when the line has none.
func (r *record) get(key string) string { return r.extra[key] }

// String is the line as written, prefixed by where it is.
func (r *record) String() string { return r.src + ": " + r.line }

// parseLine reads one history line.
func parseLine(line string) (record, error) {
	r := record{seq: -1, line: line}
	fs := strings.Fields(line)
	if len(fs) < 3 {
		return r, errors.New("fewer than 3 fields")
	}
	var err error
	if r.mono, err = strconv.ParseInt(fs[0], 10, 64); err != nil {
		return r, fmt.Errorf("monotonic time %q: %w", fs[0], err)
	}
	r.ev = fs[1]
	for _, f := range fs[2:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return r, fmt.Errorf("field %q is not key=value", f)
		}
		var n int64
		switch k {
		case "proc":
			r.proc = v
			continue
		case "job", "seq", "att", "tok", "pid":
			if n, err = strconv.ParseInt(v, 10, 64); err != nil {
				return r, fmt.Errorf("field %s=%q: %w", k, v, err)
			}
		}
		switch k {
		case "job":
			r.job = n
		case "seq":
			r.seq = n
		case "att":
			r.att = int(n)
		case "tok":
			r.tok = n
		case "pid":
			r.pid = n
		case "res", "kind", "op", "status", "mode":
			r.val = v
		default:
			if r.extra == nil {
				r.extra = map[string]string{}
			}
			r.extra[k] = v
		}
	}
	if r.proc == "" {
		return r, errors.New("no proc field")
	}
	return r, nil
}

// readHistory parses every *.log file of dir, in time order (lines of one
// file keep their order on ties). A line that does not parse is an error
// naming it, except a torn last line of a file (a process killed in the
// middle of its write cannot tear a line, but a full disk can).
func readHistory(dir string) ([]*record, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, fmt.Errorf("list history files: %w", err)
	}
	sort.Strings(files)
	var out []*record
	for _, path := range files {
		recs, err := readHistoryFile(path)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].mono < out[j].mono })
	return out, nil
}

func readHistoryFile(path string) ([]*record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	defer f.Close()
	name := filepath.Base(path)
	var out []*record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	n := 0
	var bad error
	for sc.Scan() {
		n++
		if bad != nil {
			return nil, bad // a bad line that was not the last
		}
		r, err := parseLine(sc.Text())
		if err != nil {
			bad = fmt.Errorf("history %s:%d: %w", name, n, err)
			continue
		}
		r.src = name + ":" + strconv.Itoa(n)
		out = append(out, &r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read history %s: %w", name, err)
	}
	return out, nil
}

// parseHistoryText parses history files given as text (file name to
// content), for tests of the checker on hand-made histories.
func parseHistoryText(files map[string]string) ([]*record, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*record
	for _, name := range names {
		for i, line := range strings.Split(strings.TrimSpace(files[name]), "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			r, err := parseLine(line)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, i+1, err)
			}
			r.src = name + ":" + strconv.Itoa(i+1)
			out = append(out, &r)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].mono < out[j].mono })
	return out, nil
}
