// Command benchab compares builds or settings of jobq by running their
// benchmark commands interleaved, in separate processes, and printing
// medians and ratios from the same run: on a shared machine an absolute
// figure drifts far within an hour (docs/performance.md says how far), so
// only a comparison made round by round means something. Each variant is
// a label and a command (split on spaces, no shell) that prints a
// `jobq bench` JSON line as its last line of output:
//
//	go run ./internal/cmd/benchab -rounds 10 -remove '/tmp/b/bench.db*' -- \
//	  'off=/tmp/jobq bench --db sqlite:/tmp/b/bench.db --workload drain -n 100000' \
//	  'on=/tmp/jobq bench --db sqlite:/tmp/b/bench.db --workload drain -n 100000 --observe --observe-sample 0.01'
//
// Round r runs the variants in turn starting from the r-th, so none always
// runs first. The first variant is the base of the ratios: "ratio" is the
// ratio of the medians, "pair" the median of the rounds' own ratios, and
// "ci95" an interval that holds the true median of those ratios with 95 %
// confidence or more (from their order statistics, assuming nothing about
// their distribution; it needs 6 rounds). Giving the base's command twice,
// under two labels, shows how far two identical variants drift apart.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// variant is one command to compare.
type variant struct {
	label string
	args  []string
}

// result is what benchab reads of a `jobq bench` line.
type result struct {
	JobsPerSec float64 `json:"jobs_per_sec"`
	CPUPerJob  float64 `json:"cpu_us_per_job"`
	AllocBytes float64 `json:"alloc_bytes_per_job"`
	GCs        float64 `json:"gcs"`
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "benchab:", err)
		os.Exit(2)
	}
}

func run(argv []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("benchab", flag.ContinueOnError)
	fs.SetOutput(errOut)
	rounds := fs.Int("rounds", 5, "rounds: each runs every variant once")
	remove := fs.String("remove", "", "files to delete before each run (a glob, such as a SQLite bench file and its WAL)")
	if err := fs.Parse(argv); err != nil {
		return err
	}
	vs, err := parseVariants(fs.Args())
	if err != nil {
		return err
	}
	if *rounds < 1 {
		return fmt.Errorf("-rounds %d: want 1 or more", *rounds)
	}
	got := make(map[string][]result, len(vs))
	for r := range *rounds {
		for _, v := range order(vs, r) {
			if err := removeGlob(*remove); err != nil {
				return err
			}
			res, err := runOne(v)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, v.label, err)
			}
			fmt.Fprintf(errOut, "round %d %-10s %8.0f jobs/s %6.2f µs CPU/job\n", r+1, v.label, res.JobsPerSec, res.CPUPerJob)
			got[v.label] = append(got[v.label], res)
		}
	}
	report(out, vs, got)
	return nil
}

// parseVariants reads "label=command ..." arguments.
func parseVariants(args []string) ([]variant, error) {
	if len(args) < 2 {
		return nil, errors.New("give two or more variants after --, each 'label=command args...'")
	}
	seen := map[string]bool{}
	var vs []variant
	for _, a := range args {
		label, cmd, ok := strings.Cut(a, "=")
		fields := strings.Fields(cmd)
		if !ok || label == "" || len(fields) == 0 {
			return nil, fmt.Errorf("variant %q: want 'label=command args...'", a)
		}
		if seen[label] {
			return nil, fmt.Errorf("variant label %q given twice", label)
		}
		seen[label] = true
		vs = append(vs, variant{label: label, args: fields})
	}
	return vs, nil
}

// order is the variants in round r's order: a rotation, so that each
// runs first in turn.
func order(vs []variant, r int) []variant {
	k := r % len(vs)
	return append(slices.Clone(vs[k:]), vs[:k]...)
}

func removeGlob(glob string) error {
	if glob == "" {
		return nil
	}
	paths, err := filepath.Glob(glob)
	if err != nil {
		return fmt.Errorf("-remove %q: %w", glob, err)
	}
	for _, p := range paths {
		if err := os.Remove(p); err != nil {
			return fmt.Errorf("-remove: %w", err)
		}
	}
	return nil
}

// runOne runs v and reads the last line of its output.
func runOne(v variant) (result, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(v.args[0], v.args[1:]...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%w\n%s", err, lastLines(stderr.String(), 5))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res result
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || res.JobsPerSec <= 0 {
		return result{}, fmt.Errorf("its last line is not a jobq bench result: %q", lines[len(lines)-1])
	}
	return res, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// report prints each variant's medians and its ratios to the first's.
func report(w io.Writer, vs []variant, got map[string][]result) {
	base := got[vs[0].label]
	baseRate := median(pick(base, func(r result) float64 { return r.JobsPerSec }))
	fmt.Fprintf(w, "%-10s %6s %10s %10s %10s %6s %7s %7s %7s %7s %13s\n",
		"variant", "runs", "jobs/s", "µs CPU/job", "B/job", "GCs", "ratio", "pair", "min", "max", "ci95")
	for _, v := range vs {
		rs := got[v.label]
		rate := median(pick(rs, func(r result) float64 { return r.JobsPerSec }))
		var pairs []float64
		for i := range min(len(rs), len(base)) {
			pairs = append(pairs, rs[i].JobsPerSec/base[i].JobsPerSec)
		}
		ci := "-"
		if lo, hi, ok := medianInterval(pairs, 0.95); ok {
			ci = fmt.Sprintf("%.3f-%.3f", lo, hi)
		}
		fmt.Fprintf(w, "%-10s %6d %10.0f %10.2f %10.0f %6.0f %7.3f %7.3f %7.3f %7.3f %13s\n",
			v.label, len(rs), rate,
			median(pick(rs, func(r result) float64 { return r.CPUPerJob })),
			median(pick(rs, func(r result) float64 { return r.AllocBytes })),
			median(pick(rs, func(r result) float64 { return r.GCs })),
			rate/baseRate, median(pairs), slices.Min(pairs), slices.Max(pairs), ci)
	}
}

func pick(rs []result, f func(result) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// median of xs (the mean of the middle two when their count is even).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// medianInterval returns the narrowest interval of order statistics
// [x(k), x(n+1-k)] that holds the median of the distribution xs were drawn
// from with probability conf or more, whatever that distribution: the
// median falls below x(k) only when fewer than k of n draws fall below it,
// a binomial(n, 1/2) tail. ok is false when even [min, max] is not
// confident enough (n < 6 for 95 %).
func medianInterval(xs []float64, conf float64) (lo, hi float64, ok bool) {
	n := len(xs)
	s := slices.Clone(xs)
	slices.Sort(s)
	// below is P(fewer than k of n draws fall below the median).
	below, term := 0.0, math.Pow(0.5, float64(n)) // term: P(exactly i)
	best := 0
	for k := 1; 2*k <= n; k++ {
		below += term
		if 1-2*below < conf {
			break
		}
		best = k
		term = term * float64(n-k+1) / float64(k)
	}
	if best == 0 {
		return 0, 0, false
	}
	return s[best-1], s[n-best], true
}
