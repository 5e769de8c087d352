package jobq_test

import (
	"context"
	"encoding/json"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/faultproxy"
	"github.com/jobq/jobq/internal/ticker"
)

// TestProcessWaitNotificationsCut: on the backends whose finished-jobs
// hints cross the network (PostgreSQL's LISTEN, Redis's SUBSCRIBE), a
// waiter whose connections go through a proxy that cuts them all (its
// listening connection among them) while it waits still returns the
// result that a worker process commits meanwhile, within its poll bound
// of about a second.
func TestProcessWaitNotificationsCut(t *testing.T) {
	t.Parallel()
	for _, st := range durableStores[1:] { // postgres, redis
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			db := st.URL(t)
			b, err := backend.Open(t.Context(), db)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			startWaitChild(t, db)

			u, err := url.Parse(db)
			if err != nil {
				t.Fatal(err)
			}
			proxy, err := faultproxy.Listen("127.0.0.1:0", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			ctx, stop := context.WithCancel(t.Context())
			var wg sync.WaitGroup
			wg.Go(func() { _ = proxy.Run(ctx) })
			defer func() { stop(); wg.Wait() }()
			u.Host = proxy.Addr()
			through, err := backend.Open(ctx, u.String())
			if err != nil {
				t.Fatal(err)
			}
			defer through.Close()
			waiter := mustClient(t, through, jobq.ClientConfig{})
			producer := mustClient(t, b, jobq.ClientConfig{})

			// The job becomes due a second from now: the waiter is
			// listening by then, and its connections are cut before the
			// worker runs it.
			id, err := producer.Enqueue(ctx, "wait.ok", map[string]int{"n": 21}, jobq.Queue("wait"), jobq.Delay(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			type answer struct {
				res jobq.WaitResult
				err error
				at  time.Time
			}
			got := make(chan answer, 1)
			wctx, cancel := context.WithTimeout(ctx, settle)
			defer cancel()
			go func() {
				res, err := waiter.Wait(wctx, id)
				got <- answer{res, err, time.Now()}
			}()
			for proxy.Conns() < 2 { // the look's connection and the listener's
				if !ticker.Sleep(ctx, 5*time.Millisecond) {
					t.Fatal(ctx.Err())
				}
			}
			if n := proxy.Cut(); n == 0 {
				t.Fatal("the proxy cut no connection")
			}
			a := <-got
			if a.err != nil || a.res.State != jobq.StateCompleted {
				t.Fatalf("Wait(%d) after its connections were cut = %+v, %v; want it completed", id, a.res, a.err)
			}
			var r struct{ N, At int64 }
			if err := json.Unmarshal(a.res.Result, &r); err != nil || r.N != 42 {
				t.Fatalf("result %s (%v), want n 42", a.res.Result, err)
			}
			late := a.at.Sub(time.Unix(0, r.At))
			t.Logf("%s: Wait returned %s after the handler's end, its connections cut", st.Name, late.Round(time.Millisecond))
			// The poll backs off to a second; a reconnect and a look take
			// a little more.
			if late > 3*time.Second {
				t.Fatalf("Wait returned %s after the handler ended, want within its poll bound", late)
			}
		})
	}
}
