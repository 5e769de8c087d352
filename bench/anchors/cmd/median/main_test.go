package main

import (
	"strings"
	"testing"
)

func TestReportPairsRoundByRound(t *testing.T) {
	in := "a\t{\"p99_ms\":4,\"jobs_per_sec\":200}\n" +
		"b\t{\"p99_ms\":10}\n" +
		"b\t{\"p99_ms\":20}\n" +
		"a\t{\"p99_ms\":12}\n" +
		"a\t{\"p99_ms\":2}\n" +
		"b\t{\"p99_ms\":4}\n"
	got, order, err := read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var rs ratios
	if err := rs.Set("a/b:p99_ms<=0.5"); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := report(&out, got, order, rs); err != nil {
		t.Fatal(err)
	}
	// Rounds pair 4/10, 12/20, 2/4: ratios 0.4, 0.6, 0.5, median 0.5.
	for _, want := range []string{
		"a p99_ms 3 4.00 2.00-12.0",
		"a jobs_per_sec 1 200 200-200",
		"b p99_ms 3 10.0 4.00-20.0",
		"a/b p99_ms: round by round median 0.500 (0.400-0.600 over 3 rounds); target <= 0.5: met",
	} {
		// Columns are padded for reading: compare with single spaces.
		if !strings.Contains(strings.Join(strings.Fields(out.String()), " "), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRatioFlagRefusesNonsense(t *testing.T) {
	for _, s := range []string{"a:p99_ms", "a/b", "/b:x", "a/b:x<=-1", "a/b:x<=y"} {
		var rs ratios
		if err := rs.Set(s); err == nil {
			t.Errorf("Set(%q) accepted", s)
		}
	}
}
