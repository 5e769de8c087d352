package admin

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/jobq/jobq"
)

// BenchmarkOverview renders the overview over 100,000 live jobs (five
// queues, a fifth of them scheduled) and 10,000 failed jobs, with the
// counts cache emptied before every render and a history sample due, so
// each render pays for every backend query a viewer can cause: the counts
// (Inspector.Queues) and the three one-row reads of the sample. It
// reports the median and fails when the median passes 200 ms.
//
//	go test -run '^$' -bench BenchmarkOverview -benchtime 50x ./admin
func BenchmarkOverview(b *testing.B) {
	for _, st := range stores {
		b.Run(st.Name, func(b *testing.B) {
			be := openStore(b, st.URL(b))
			start := time.Now()
			for i, q := range []string{"mail", "billing", "reports", "search", "webhooks"} {
				insertJobs(b, be, q, 16_000, `{"to":"ann@example.com","n":1}`, 0)
				insertJobs(b, be, q, 4_000, `{}`, time.Hour)
				if i < 2 {
					failJobs(b, be, "dead-"+q, 5_000, `{"n":1}`, "boom")
				}
			}
			b.Logf("seeded 100,000 jobs and 10,000 failed in %s", time.Since(start).Round(time.Millisecond))

			h, err := New(Options{Inspector: jobq.NewInspector(be)})
			if err != nil {
				b.Fatal(err)
			}
			s := h.(*server)
			d := s.dash
			var took []time.Duration
			for b.Loop() {
				d.counts.invalidate()
				d.counts.mu.Lock()
				d.counts.samples = nil
				d.counts.mu.Unlock()
				rec := httptest.NewRecorder()
				t0 := time.Now()
				s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://localhost/", nil))
				took = append(took, time.Since(t0))
				if rec.Code != http.StatusOK {
					b.Fatalf("overview: %d %s", rec.Code, rec.Body)
				}
			}
			slices.Sort(took)
			med := took[len(took)/2]
			b.ReportMetric(float64(med.Microseconds())/1000, "median-ms")
			b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
			if med > 200*time.Millisecond {
				b.Errorf("median overview render %s, want under 200ms", med)
			}
		})
	}
}
