package admin

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// BenchmarkAPIEnqueue measures enqueue throughput over HTTP (a real
// server on loopback, keep-alive connections) into SQLite and PostgreSQL:
// one job a request from 8 concurrent clients, and batches of 100.
//
//	go test -run '^$' -bench APIEnqueue -benchtime 3s -count 5 ./admin
func BenchmarkAPIEnqueue(b *testing.B) {
	for _, st := range stores[:2] {
		b.Run(st.Name+"/single", func(b *testing.B) {
			e := newEnv(b, st.URL(b), Options{})
			c := benchClient(b)
			body := []byte(`{"type":"bench","queue":"bench","payload":{"to":"a@example.com","n":1}}`)
			b.SetParallelism(4) // 4 × GOMAXPROCS clients
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					post(b, c, e.srv.URL+"/api/v1/jobs", body, http.StatusCreated)
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
		})
		b.Run(st.Name+"/batch100", func(b *testing.B) {
			e := newEnv(b, st.URL(b), Options{})
			c := benchClient(b)
			var buf bytes.Buffer
			buf.WriteString(`{"jobs":[`)
			for i := range 100 {
				if i > 0 {
					buf.WriteByte(',')
				}
				fmt.Fprintf(&buf, `{"type":"bench","queue":"bench","payload":{"to":"a@example.com","n":%d}}`, i)
			}
			buf.WriteString(`]}`)
			body := buf.Bytes()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				post(b, c, e.srv.URL+"/api/v1/jobs/batch", body, http.StatusCreated)
			}
			b.ReportMetric(float64(100*b.N)/time.Since(start).Seconds(), "jobs/s")
		})
	}
}

// benchClient keeps enough idle connections for every parallel client,
// so the figures are not of TCP handshakes.
func benchClient(b *testing.B) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func post(b *testing.B, c *http.Client, url string, body []byte, want int) {
	res, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != want {
		b.Fatalf("POST %s: %d", url, res.StatusCode)
	}
}
