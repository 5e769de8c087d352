package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/postgres/pgtest"
)

// TestServerRestart: across a restart of (a private) server, calls fail
// with ErrUnavailable while it is down, then work again on fresh
// connections; committed jobs survive; the listener reconnects and wakes
// its subscribers.
func TestServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private server")
	}
	t.Parallel()
	srv := pgtest.StartServer(t)
	b := openSchema(t, srv.URL, Options{QueryTimeout: 2 * time.Second})
	ids := insertN(t, b, "q", 10)
	held := claimOne(t, b, "q")
	ch, cancel := b.Subscribe([]string{"q"})
	defer cancel()
	waitFor(t, time.Minute, "the listener to connect", func() bool { return b.listener.pid.Load() != 0 })
	pid := b.listener.pid.Load()
	drain(ch) // the wake-up of the first connect

	srv.Stop("immediate")
	_, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 1, Lease: time.Minute})
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("JobClaim while the server is down: err = %v, want ErrUnavailable", err)
	}
	srv.Start()

	waitFor(t, 30*time.Second, "the listener to reconnect", func() bool {
		p := b.listener.pid.Load()
		return p != 0 && p != pid
	})
	wantWake(t, ch, "the listener reconnected")
	var rows []*backend.JobRow
	waitFor(t, 30*time.Second, "claims to work again", func() bool {
		rows, err = b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"q"}, Max: 100, Lease: time.Minute})
		return err == nil
	})
	if len(rows) != len(ids)-1 {
		t.Fatalf("claimed %d jobs after the restart, want %d", len(rows), len(ids)-1)
	}
	if row, err := b.JobGet(t.Context(), held.ID); err != nil || row.Status != backend.StateReserved {
		t.Fatalf("job held before the restart = %+v, %v; want reserved", row, err)
	}
}
