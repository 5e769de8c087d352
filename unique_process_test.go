package jobq_test

// Uniqueness across processes: several producer processes (this test
// binary re-executed with uniqueChildEnv set, see TestMain) enqueue the
// same identities at the same moment, one job a call and in batches, and
// the store keeps exactly one job of each while every caller learns its ID.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/internal/proctest"
	"github.com/jobq/jobq/internal/ticker"
)

const (
	uniqueChildEnv    = "JOBQ_TEST_UNIQUE_URL"
	uniqueChildOutEnv = "JOBQ_TEST_UNIQUE_OUT"
	// uniqueSingles identities are enqueued one a call, then
	// uniqueBatches batches of uniqueBatch identities each.
	uniqueSingles, uniqueBatches, uniqueBatch = 60, 6, 20
)

// uniqueIdentities is how many identities a producer process enqueues.
const uniqueIdentities = uniqueSingles + uniqueBatches*uniqueBatch

// uniquePayload is identity n's payload: the identity is built from the
// type and the args (UniqueBy{Args: true}), so every process computes it
// on its own.
func uniquePayload(n int) json.RawMessage {
	return json.RawMessage(`{"n":` + strconv.Itoa(n) + `}`)
}

// runUniqueChild is a producer process: once the test creates
// <out>.go, it enqueues every identity and writes "n id dup" per
// identity to out. It exits non-zero on any error other than a duplicate.
func runUniqueChild() int {
	ctx, stop := proctest.ChildContext()
	defer stop()
	out := os.Getenv(uniqueChildOutEnv)
	b, err := backend.OpenWith(ctx, os.Getenv(uniqueChildEnv), backend.OpenOptions{Existing: true})
	if err != nil {
		return childFailed(ctx, "open", err)
	}
	defer b.Close()
	c, err := jobq.NewClient(b, jobq.ClientConfig{})
	if err != nil {
		return childFailed(ctx, "client", err)
	}
	for {
		if _, err := os.Stat(out + ".go"); err == nil {
			break
		}
		if !ticker.Sleep(ctx, time.Millisecond) {
			return childFailed(ctx, "wait for the start", ctx.Err())
		}
	}
	var lines strings.Builder
	opt := jobq.Unique(jobq.UniqueBy{Args: true})
	for n := range uniqueSingles {
		id, err := c.Enqueue(ctx, "u.proc", uniquePayload(n), opt)
		if err != nil && !errors.Is(err, jobq.ErrDuplicate) {
			return childFailed(ctx, "enqueue", err)
		}
		fmt.Fprintf(&lines, "%d %d %t\n", n, id, err != nil)
	}
	for i := range uniqueBatches {
		specs := make([]jobq.JobSpec, uniqueBatch)
		for j := range specs {
			specs[j] = jobq.JobSpec{Type: "u.proc", Payload: uniquePayload(uniqueSingles + i*uniqueBatch + j), Options: []jobq.EnqueueOption{opt}}
		}
		res, err := c.EnqueueMany(ctx, specs)
		if err != nil {
			return childFailed(ctx, "enqueue a batch", err)
		}
		for j, r := range res {
			fmt.Fprintf(&lines, "%d %d %t\n", uniqueSingles+i*uniqueBatch+j, r.ID, r.Duplicate)
		}
	}
	if err := os.WriteFile(out, []byte(lines.String()), 0o644); err != nil {
		return childFailed(ctx, "write the results", err)
	}
	return 0
}

// uniqueAnswer is what one process heard for one identity.
type uniqueAnswer struct {
	id  int64
	dup bool
}

// readUniqueAnswers reads a producer's results: identity to answer.
func readUniqueAnswers(t *testing.T, path string) map[int]uniqueAnswer {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("a producer's results: %v", err)
	}
	defer f.Close()
	out := map[int]uniqueAnswer{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var n int
		var a uniqueAnswer
		if _, err := fmt.Sscanf(sc.Text(), "%d %d %t", &n, &a.id, &a.dup); err != nil {
			t.Fatalf("result line %q: %v", sc.Text(), err)
		}
		out[n] = a
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestProcessUnique: 4 processes enqueue the same 180 identities at the
// same moment (60 one a call, 120 in batches of 20). The store holds
// exactly one job of each identity; every process got that job's ID for
// it, and exactly one of them got it as a new job, the others as a
// duplicate.
func TestProcessUnique(t *testing.T) {
	if testing.Short() {
		t.Skip("starts producer processes")
	}
	for _, st := range durableStores {
		t.Run(st.Name, func(t *testing.T) {
			t.Parallel()
			const procs = 4
			url := st.URL(t)
			b, err := backend.Open(t.Context(), url)
			if err != nil {
				t.Fatalf("open %s: %v", backend.RedactURL(url), err)
			}
			t.Cleanup(func() { b.Close() })
			dir := t.TempDir()
			outs := make([]string, procs)
			ps := make([]*proctest.Proc, procs)
			for i := range ps {
				outs[i] = filepath.Join(dir, "p"+strconv.Itoa(i))
				ps[i] = proctest.StartProc(t, uniqueChildEnv+"="+url, uniqueChildOutEnv+"="+outs[i])
			}
			for _, o := range outs {
				if err := os.WriteFile(o+".go", nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			waitExited(t, ps, time.Minute)

			answers := make([]map[int]uniqueAnswer, procs)
			for i, o := range outs {
				answers[i] = readUniqueAnswers(t, o)
			}
			ids := map[int64]bool{}
			for n := range uniqueIdentities {
				first, fresh := answers[0][n].id, 0
				for i := range procs {
					a, ok := answers[i][n]
					if !ok || a.id != first || a.id == 0 {
						t.Fatalf("identity %d: process %d answered %+v (present %t), process 0 answered ID %d", n, i, a, ok, first)
					}
					if !a.dup {
						fresh++
					}
				}
				if fresh != 1 {
					t.Fatalf("identity %d: %d processes were told they inserted it, want exactly 1", n, fresh)
				}
				ids[first] = true
			}
			if got := liveJobs(t, b, "u.proc"); got != uniqueIdentities || len(ids) != uniqueIdentities {
				t.Fatalf("%d jobs stored, %d distinct IDs answered; want %d of each", got, len(ids), uniqueIdentities)
			}
			for id := range ids {
				row, err := b.JobGet(context.Background(), id)
				if err != nil {
					t.Fatalf("answered job %d: %v", id, err)
				}
				if row.Type != "u.proc" {
					t.Fatalf("answered job %d is a %q", id, row.Type)
				}
			}
		})
	}
}

// waitExited waits until every process has exited 0, failing t if one
// exits otherwise or they outlive within.
func waitExited(t *testing.T, ps []*proctest.Proc, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, p := range ps {
		for p.Running() {
			if time.Now().After(deadline) {
				t.Fatalf("%s still running after %s", p, within)
			}
			if !ticker.Sleep(t.Context(), 10*time.Millisecond) {
				t.Fatal(t.Context().Err())
			}
		}
		if err := p.Err(); err != nil {
			t.Fatalf("%s: %v\n%s", p, err, p.Output())
		}
	}
}
