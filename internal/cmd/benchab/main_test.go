package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRotation: every variant runs first in turn.
func TestRotation(t *testing.T) {
	vs := []variant{{label: "a"}, {label: "b"}, {label: "c"}}
	var firsts []string
	for r := range 4 {
		o := order(vs, r)
		if len(o) != 3 {
			t.Fatalf("round %d runs %d variants, want 3", r, len(o))
		}
		firsts = append(firsts, o[0].label)
	}
	if got := strings.Join(firsts, ""); got != "abca" {
		t.Fatalf("first in rounds 1-4: %s, want abca", got)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {nil, 0}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %g, want %g", c.xs, got, c.want)
		}
	}
}

// TestMedianInterval: the interval is the widest order statistics whose
// binomial coverage reaches the confidence: min-max for 6 to 8 ratios
// (1-2/2^n), the 2nd and 9th of 10 (97.9 %; the 3rd and 8th would be
// 89 %), none for 5.
func TestMedianInterval(t *testing.T) {
	seq := func(n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(n - i) // descending: the function sorts
		}
		return xs
	}
	for _, c := range []struct {
		n      int
		lo, hi float64
		ok     bool
	}{{5, 0, 0, false}, {6, 1, 6, true}, {8, 1, 8, true}, {10, 2, 9, true}, {12, 3, 10, true}} {
		lo, hi, ok := medianInterval(seq(c.n), 0.95)
		if lo != c.lo || hi != c.hi || ok != c.ok {
			t.Errorf("n=%d: %g-%g %v, want %g-%g %v", c.n, lo, hi, ok, c.lo, c.hi, c.ok)
		}
	}
}

func TestBadVariants(t *testing.T) {
	for _, args := range [][]string{
		{"a=echo"},               // one variant
		{"a=echo", "noequals"},   // no label
		{"a=echo", "b="},         // no command
		{"a=echo x", "a=echo y"}, // a label twice
	} {
		if _, err := parseVariants(args); err == nil {
			t.Errorf("parseVariants(%q) accepted", args)
		}
	}
}

// TestRun: two variants whose commands print fixed bench lines give the
// medians and ratios of those figures; -remove deletes its files before
// each run.
func TestRun(t *testing.T) {
	echo, err := exec.LookPath("echo")
	if err != nil {
		t.Skip("no echo command:", err)
	}
	dir := t.TempDir()
	stale := filepath.Join(dir, "bench.db-wal")
	if err := os.WriteFile(stale, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	err = run([]string{"-rounds", "3", "-remove", filepath.Join(dir, "bench.db*"), "--",
		`off=` + echo + ` {"jobs_per_sec":1000,"cpu_us_per_job":10}`,
		`on=` + echo + ` {"jobs_per_sec":900,"cpu_us_per_job":11}`,
	}, &out, &errOut)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("-remove left %s: %v", stale, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("report has %d lines, want a header and 2:\n%s", len(lines), out.String())
	}
	on := strings.Fields(lines[2])
	if on[0] != "on" || on[1] != "3" || on[2] != "900" || on[6] != "0.900" || on[7] != "0.900" {
		t.Fatalf("on's line %q: want 3 runs, 900 jobs/s, ratio and pair 0.900", lines[2])
	}
}

// TestNotABenchLine: a command whose last line is not a bench result is
// refused, naming the line.
func TestNotABenchLine(t *testing.T) {
	echo, err := exec.LookPath("echo")
	if err != nil {
		t.Skip("no echo command:", err)
	}
	var out, errOut bytes.Buffer
	err = run([]string{"-rounds", "1", "--", "a=" + echo + " hello", "b=" + echo + " hello"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), `"hello"`) {
		t.Fatalf("run = %v; want an error naming the line", err)
	}
}
