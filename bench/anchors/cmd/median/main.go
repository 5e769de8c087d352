// Command median summarises the rounds run.sh ran: it reads lines
// "label<TAB>json" (one program's result line per round) and prints, per
// label and per figure, the median over the rounds and their spread
// (min–max), then each ratio asked for with -ratio, taken round by round
// (the i-th line of one label against the i-th of the other: two runs next
// to each other on a machine whose speed drifts compare better than two
// medians), and whether the median ratio meets the target given with it.
//
//	median -ratio 'jobq-lat/river-lat:p99_ms<=0.5' < results.tsv
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// fields are the figures reported, in this order, when a line has them.
var fields = []string{"jobs_per_sec", "p50_ms", "p90_ms", "p99_ms", "max_ms", "peak_rss_mb", "drain_peak_rss_mb"}

// ratio is one -ratio: num/den of field, with an optional target.
type ratio struct {
	num, den, field string
	atMost          float64 // 0: no target
}

type ratios []ratio

func (r *ratios) String() string { return fmt.Sprint(*r) }

// Set reads "num/den:field" or "num/den:field<=target".
func (r *ratios) Set(s string) error {
	pair, rest, ok := strings.Cut(s, ":")
	num, den, ok2 := strings.Cut(pair, "/")
	if !ok || !ok2 || num == "" || den == "" {
		return fmt.Errorf("%q: want num/den:field or num/den:field<=target", s)
	}
	x := ratio{num: num, den: den, field: rest}
	if f, t, ok := strings.Cut(rest, "<="); ok {
		v, err := strconv.ParseFloat(t, 64)
		if err != nil || v <= 0 {
			return fmt.Errorf("%q: target %q is not a positive number", s, t)
		}
		x.field, x.atMost = f, v
	}
	*r = append(*r, x)
	return nil
}

func main() {
	var rs ratios
	flag.Var(&rs, "ratio", "num/den:field[<=target], repeatable: a ratio of two labels' figure, round by round")
	flag.Parse()
	got, order, err := read(os.Stdin)
	if err == nil {
		err = report(os.Stdout, got, order, rs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "median:", err)
		os.Exit(1)
	}
}

// read collects each label's figures per round, in the order the lines
// came, and the labels in order of first appearance.
func read(r io.Reader) (map[string][]map[string]float64, []string, error) {
	got := map[string][]map[string]float64{}
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		label, js, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, nil, fmt.Errorf("line %d: want label<TAB>json", n)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			return nil, nil, fmt.Errorf("line %d (%s): %w", n, label, err)
		}
		figs := map[string]float64{}
		for _, f := range fields {
			if v, ok := m[f].(float64); ok {
				figs[f] = v
			}
		}
		if _, seen := got[label]; !seen {
			order = append(order, label)
		}
		got[label] = append(got[label], figs)
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("read the results: %w", err)
	}
	return got, order, nil
}

func report(w io.Writer, got map[string][]map[string]float64, order []string, rs ratios) error {
	fmt.Fprintf(w, "%-12s %-18s %5s %10s %21s\n", "variant", "figure", "runs", "median", "min-max")
	for _, label := range order {
		for _, f := range fields {
			xs := column(got[label], f)
			if len(xs) == 0 {
				continue
			}
			fmt.Fprintf(w, "%-12s %-18s %5d %10s %21s\n", label, f, len(xs), num(median(xs)),
				num(slices.Min(xs))+"-"+num(slices.Max(xs)))
		}
	}
	if len(rs) > 0 {
		fmt.Fprintln(w)
	}
	for _, r := range rs {
		nums, dens := got[r.num], got[r.den]
		if len(nums) == 0 || len(dens) == 0 {
			return fmt.Errorf("-ratio %s/%s: no results for one of them", r.num, r.den)
		}
		var pairs []float64
		for i := range min(len(nums), len(dens)) {
			a, aok := nums[i][r.field]
			b, bok := dens[i][r.field]
			if aok && bok && b != 0 {
				pairs = append(pairs, a/b)
			}
		}
		if len(pairs) == 0 {
			return fmt.Errorf("-ratio %s/%s: no round has %s for both", r.num, r.den, r.field)
		}
		m := median(pairs)
		fmt.Fprintf(w, "%s/%s %s: round by round median %.3f (%.3f-%.3f over %d rounds)",
			r.num, r.den, r.field, m, slices.Min(pairs), slices.Max(pairs), len(pairs))
		if r.atMost > 0 {
			verdict := "met"
			if m > r.atMost {
				verdict = "NOT met"
			}
			fmt.Fprintf(w, "; target <= %g: %s", r.atMost, verdict)
		}
		fmt.Fprintln(w)
	}
	return nil
}

func column(rounds []map[string]float64, f string) []float64 {
	var xs []float64
	for _, r := range rounds {
		if v, ok := r[f]; ok {
			xs = append(xs, v)
		}
	}
	return xs
}

// median of xs (the mean of the middle two when their count is even).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// num prints a figure with no more digits than it means.
func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
