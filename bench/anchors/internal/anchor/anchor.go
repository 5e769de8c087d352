// Package anchor holds what the anchor programs share, so that jobq and the
// libraries it is compared with are measured by the same code: latency
// percentiles computed as jobq bench computes them, and a process's peak
// resident set read from the kernel the same way for every program.
package anchor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Percentiles are the latency fields of a `jobq bench --workload latency`
// line, under the same JSON names, so that a River line and a jobq line
// compare field by field.
type Percentiles struct {
	P50Ms float64 `json:"p50_ms"`
	P90Ms float64 `json:"p90_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// PercentilesOf sorts lats in place and returns its percentiles by nearest
// rank, in milliseconds rounded to the microsecond: internal/bench's pctMs,
// repeated here because a figure computed two ways would not compare.
func PercentilesOf(lats []time.Duration) Percentiles {
	slices.Sort(lats)
	pct := func(q float64) float64 {
		if len(lats) == 0 {
			return 0
		}
		i := int(math.Ceil(q*float64(len(lats)))) - 1
		i = min(max(i, 0), len(lats)-1)
		return float64(lats[i].Microseconds()) / 1000
	}
	return Percentiles{P50Ms: pct(0.50), P90Ms: pct(0.90), P99Ms: pct(0.99), MaxMs: pct(1)}
}

// Memory is a process's peak resident set, as the memory programs print it.
type Memory struct {
	// PeakRSSMB is the whole run's peak, queuing the jobs included.
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// DrainPeakRSSMB is the peak from Meter.StartDrain, called once the
	// jobs are queued, to the end: what draining them took, as a worker
	// process that had not queued them itself would see it.
	DrainPeakRSSMB float64 `json:"drain_peak_rss_mb"`
}

// Meter reads the kernel's peak resident set mark (VmHWM) of this process
// for the whole run and for the drain alone. Both memory programs use it
// at the same points, so jobq and Asynq are measured alike.
type Meter struct {
	setup float64 // the peak before StartDrain reset the mark
}

// StartDrain notes the peak the set-up reached, returns the heap the set-up
// left behind to the kernel (a worker process would not hold the queuing's
// garbage) and resets the kernel's peak mark to the current resident set,
// by writing 5 to /proc/self/clear_refs (Linux 4.0 and later).
func (m *Meter) StartDrain() error {
	p, err := statusField("VmHWM")
	if err != nil {
		return err
	}
	m.setup = p
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return fmt.Errorf("reset the peak resident set: %w", err)
	}
	return nil
}

// Read returns the peaks at the end of the run.
func (m *Meter) Read() (Memory, error) {
	p, err := statusField("VmHWM")
	if err != nil {
		return Memory{}, err
	}
	return Memory{PeakRSSMB: max(p, m.setup), DrainPeakRSSMB: p}, nil
}

// statusField reads a "kB" line of /proc/self/status, in MiB.
func statusField(name string) (float64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, fmt.Errorf("read /proc/self/status: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != name {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s %q: %w", name, v, err)
		}
		return math.Round(kb/1024*10) / 10, nil
	}
	return 0, fmt.Errorf("/proc/self/status has no %s line", name)
}

// ModuleVersion is the version of module path this binary was built with
// (e.g. "v0.51.2"), so that every line names what it measured.
func ModuleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			if d.Replace != nil && d.Replace.Version == "" {
				return "(replaced by " + d.Replace.Path + ")"
			}
			return d.Version
		}
	}
	return "unknown"
}

// Round keeps a figure readable as jobq bench rounds its own: whole above
// 100, two decimals above 1, else four significant digits (so a short run
// never rounds to 0).
func Round(f float64) float64 {
	switch {
	case f >= 100:
		return math.Round(f)
	case f >= 1:
		return math.Round(f*100) / 100
	}
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 4, 64), 64)
	return v
}

// PrintJSON writes v as one line of JSON to standard output: the line
// run.sh and cmd/median read.
func PrintJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode the result: %w", err)
	}
	_, err = fmt.Println(string(b))
	return err
}

// tree is the jobq commit run.sh builds from, set with -ldflags "-X": Go
// stamps no VCS information into a module nested in a repository's
// subdirectory.
var tree string

// TreeVersion names the jobq tree this binary was built from (run.sh sets
// it from git describe), as jobq is measured from source rather than from a
// release.
func TreeVersion() string {
	if tree != "" {
		return tree
	}
	return "unknown"
}
