package proctest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
)

// PrintMax is how many records of one message a Log prints; workers
// that print their own errors use it too.
const PrintMax = 5

// Log is a worker process's slog handler: it prints the first few
// warnings and errors of each message to stderr and counts all of them,
// so that a warning logged once per batch cannot flood the test's output
// while the test can still assert how often it came.
type Log struct {
	pid     int
	mu      sync.Mutex
	records map[slog.Level]map[string]int64
	jobSums map[string]int64 // sum of the "jobs" attribute per message
}

// NewLog returns the handler of the worker process pid.
func NewLog(pid int) *Log {
	return &Log{pid: pid, records: map[slog.Level]map[string]int64{}, jobSums: map[string]int64{}}
}

// Enabled keeps warnings and errors.
func (l *Log) Enabled(_ context.Context, level slog.Level) bool { return level >= slog.LevelWarn }

// WithAttrs returns l: attributes are printed from each record.
func (l *Log) WithAttrs([]slog.Attr) slog.Handler { return l }

// WithGroup returns l.
func (l *Log) WithGroup(string) slog.Handler { return l }

// Handle counts r and prints it while its message is under PrintMax.
func (l *Log) Handle(_ context.Context, r slog.Record) error {
	var attrs strings.Builder
	var jobs int64
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&attrs, " %s=%v", a.Key, a.Value)
		if a.Key == "jobs" {
			jobs = a.Value.Int64()
		}
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.records[r.Level] == nil {
		l.records[r.Level] = map[string]int64{}
	}
	l.records[r.Level][r.Message]++
	l.jobSums[r.Message] += jobs
	if l.records[r.Level][r.Message] <= PrintMax {
		fmt.Fprintf(os.Stderr, "worker %d: %s %s%s\n", l.pid, r.Level, r.Message, attrs.String())
	}
	return nil
}

// Jobs is the sum of the "jobs" attribute of the records of msg.
func (l *Log) Jobs(msg string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.jobSums[msg]
}

// Count is how many records of level had message msg.
func (l *Log) Count(level slog.Level, msg string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.records[level][msg]
}

// Total is how many records of level there were.
func (l *Log) Total(level slog.Level) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, c := range l.records[level] {
		n += c
	}
	return n
}

// Report prints how often each message was logged.
func (l *Log) Report() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for level, msgs := range l.records {
		for msg, n := range msgs {
			fmt.Fprintf(os.Stderr, "worker %d: logged %dx %s %q (jobs=%d)\n", l.pid, n, level, msg, l.jobSums[msg])
		}
	}
}
