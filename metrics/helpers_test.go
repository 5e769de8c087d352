package metrics_test

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape is one parsed read of a /metrics page.
type scrape struct {
	text string
	fams map[string]*dto.MetricFamily
}

// get fetches url and returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(body)
}

// scrapeURL reads and parses a metrics page over HTTP.
func scrapeURL(t *testing.T, url string) scrape {
	t.Helper()
	code, body := get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", url, code, body)
	}
	return parse(t, body)
}

func parse(t *testing.T, text string) scrape {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse scrape: %v\n%s", err, text)
	}
	return scrape{text: text, fams: fams}
}

// find returns the sample of name whose labels include want's.
func (s scrape) find(name string, want map[string]string) (*dto.Metric, bool) {
	f, ok := s.fams[name]
	if !ok {
		return nil, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

// value returns a counter's or gauge's value, or a histogram's count;
// ok is false when the series is absent.
func (s scrape) value(name string, labels map[string]string) (float64, bool) {
	m, ok := s.find(name, labels)
	switch {
	case !ok:
		return 0, false
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount()), true
	}
	return 0, false
}

// want maps "name{k=v,...}" to an expected value; absent expects the
// series not to exist.
type want map[string]float64

const absent = -1

// check asserts every expectation, reporting all mismatches at once.
func (s scrape) check(t *testing.T, w want) {
	t.Helper()
	keys := make([]string, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var bad []string
	for _, k := range keys {
		name, labels := splitSeries(k)
		got, ok := s.value(name, labels)
		switch {
		case w[k] == absent && ok:
			bad = append(bad, fmt.Sprintf("%s = %g, want absent", k, got))
		case w[k] != absent && !ok:
			bad = append(bad, fmt.Sprintf("%s absent, want %g", k, w[k]))
		case w[k] != absent && got != w[k]:
			bad = append(bad, fmt.Sprintf("%s = %g, want %g", k, got, w[k]))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("scrape:\n  %s\n\n%s", strings.Join(bad, "\n  "), s.jobqLines())
	}
}

// jobqLines is the scrape's jobq series, for failure messages.
func (s scrape) jobqLines() string {
	var out []string
	for _, l := range strings.Split(s.text, "\n") {
		if strings.HasPrefix(l, "jobq_") && !strings.Contains(l, "_bucket{") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// splitSeries parses "name{k=v,k2=v2}".
func splitSeries(s string) (string, map[string]string) {
	name, rest, ok := strings.Cut(s, "{")
	labels := map[string]string{}
	if !ok {
		return name, labels
	}
	for _, kv := range strings.Split(strings.TrimSuffix(rest, "}"), ",") {
		k, v, _ := strings.Cut(kv, "=")
		labels[k] = v
	}
	return name, labels
}

// eventually polls cond until it holds or fails the test after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
