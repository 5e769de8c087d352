package backendtest

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// testWorkflowConcurrency: releases under concurrent completions happen
// exactly once, and no stored count drifts at any moment.
func testWorkflowConcurrency(t *testing.T, h Harness) {
	parallel(t, h, "FanIn1000", func(t *testing.T, b backend.Backend) {
		// 1,000 tasks and one join, worked by 4 claimers completing in
		// batches at once: the join runs exactly once, after all 1,000,
		// and WorkflowCheck, sampled throughout, never sees a count off.
		w := workflower(t, b)
		const n = 1000
		tasks := make([]backend.TaskParams, 0, n+1)
		names := make([]string, n)
		for i := range n {
			names[i] = fmt.Sprintf("part%04d", i)
			tasks = append(tasks, task(names[i]))
		}
		tasks = append(tasks, task("join", names...))
		id := wfInsert(t, w, tasks...)

		var parts, joins atomic.Int64
		var earlyJoin atomic.Bool
		stop := make(chan struct{})
		var checks sync.WaitGroup
		checks.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				drift, err := w.WorkflowCheck(t.Context())
				if err != nil {
					t.Errorf("WorkflowCheck during the fan-in: %v", err)
					return
				}
				if len(drift) != 0 {
					t.Errorf("WorkflowCheck during the fan-in found drift: %v", drift)
					return
				}
			}
		})
		// A lost release leaves nothing to claim: the workers give up
		// once nothing came for waitLimit, rather than spin until the
		// test binary's timeout.
		var lastClaim atomic.Int64
		lastClaim.Store(time.Now().UnixNano())
		var workers sync.WaitGroup
		for range 4 {
			workers.Go(func() {
				for joins.Load() == 0 && !t.Failed() {
					rows, err := b.JobClaim(t.Context(), backend.ClaimParams{Queues: []string{"w"}, Max: 25, Lease: longLease})
					if err != nil {
						t.Errorf("JobClaim: %v", err)
						return
					}
					outs := make([]backend.Outcome, 0, len(rows))
					for _, r := range rows {
						if r.Type == "join" {
							joins.Add(1)
							// Released by the last part's completion:
							// every part has succeeded by now.
							wf, err := w.WorkflowGet(t.Context(), id)
							if err != nil {
								t.Errorf("WorkflowGet: %v", err)
								return
							}
							if wf.Counts.Succeeded != n {
								earlyJoin.Store(true)
							}
						} else {
							parts.Add(1)
						}
						outs = append(outs, done(r.Ref()))
					}
					if len(outs) == 0 {
						if idle := time.Since(time.Unix(0, lastClaim.Load())); idle > waitLimit {
							t.Errorf("nothing to claim for %s with %d parts done and no join: the join was never released", idle.Round(time.Second), parts.Load())
							return
						}
						continue
					}
					lastClaim.Store(time.Now().UnixNano())
					res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: outs})
					if err != nil {
						t.Errorf("JobComplete: %v", err)
						return
					}
					if len(res.Stale) != 0 {
						t.Errorf("JobComplete: stale %v", res.Stale)
					}
				}
			})
		}
		workers.Wait()
		close(stop)
		checks.Wait()
		if earlyJoin.Load() {
			t.Fatal("the join was claimed while some of the 1,000 parts had not succeeded")
		}
		if joins.Load() != 1 || parts.Load() != n {
			t.Fatalf("the join was claimed %d times after %d parts, want once after %d", joins.Load(), parts.Load(), n)
		}
		claimNone(t, b, "w")
		wf := wantWorkflow(t, w, id, backend.WorkflowSucceeded)
		if wf.Counts != (backend.TaskCounts{Succeeded: n + 1}) {
			t.Fatalf("Counts = %+v, want %d succeeded", wf.Counts, n+1)
		}
		noDrift(t, w)
		// The join reads its 1,000 dependencies, in its Deps order.
		deps, err := w.WorkflowDeps(t.Context(), taskNamed(t, wf, "join").JobID)
		if err != nil || len(deps) != n {
			t.Fatalf("WorkflowDeps(join) = %d deps, %v; want %d", len(deps), err, n)
		}
		for i, d := range deps {
			if d.Name != names[i] || d.State != backend.TaskSucceeded {
				t.Fatalf("WorkflowDeps(join)[%d] = %+v, want %s succeeded", i, d, names[i])
			}
		}
	})

	parallel(t, h, "LastTwoAtOnce", func(t *testing.T, b backend.Backend) {
		// The last two dependencies complete in two concurrent calls, 20
		// times over: each join is released exactly once.
		w := workflower(t, b)
		const rounds = 20
		ids := make([]int64, rounds)
		for i := range rounds {
			ids[i] = wfInsert(t, w, task(fmt.Sprintf("l%d", i)), task(fmt.Sprintf("r%d", i)), task(fmt.Sprintf("j%d", i), fmt.Sprintf("l%d", i), fmt.Sprintf("r%d", i)))
		}
		got := claimTasks(t, b)
		if len(got) != 2*rounds {
			t.Fatalf("claimed %d jobs, want %d", len(got), 2*rounds)
		}
		var wg sync.WaitGroup
		for i := range rounds {
			for _, side := range []string{"l", "r"} {
				r := got[fmt.Sprintf("%s%d", side, i)]
				wg.Go(func() {
					if res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{done(r.Ref())}}); err != nil || len(res.Stale) != 0 {
						t.Errorf("JobComplete of %s: %+v, %v", r.Type, res, err)
					}
				})
			}
		}
		wg.Wait()
		joins := claimTasks(t, b)
		if len(joins) != rounds {
			t.Fatalf("claimed %d joins, want %d", len(joins), rounds)
		}
		for i, id := range ids {
			j := taskNamed(t, wfGet(t, w, id), fmt.Sprintf("j%d", i))
			if r := joins[j.Name]; r == nil || r.ID != j.JobID {
				t.Fatalf("join %s: job %d, claimed %v", j.Name, j.JobID, r)
			}
		}
		noDrift(t, w)
	})

	parallel(t, h, "ReplayRacesSiblingEnd", func(t *testing.T, b backend.Backend) {
		// r waits on f and d; f failed, which cancelled r. A replay of f
		// and the end of d then run at once, 100 times over. Whichever
		// commits first, r counts d's end: when d succeeded r waits on f
		// alone, when d failed r is cancelled by d. A store that reads r
		// as it was before the replay committed loses d's end, and r
		// waits forever (issue 39).
		w := workflower(t, b)
		const rounds = 100
		name := func(s string, i int) string { return fmt.Sprintf("%s%d", s, i) }
		ids := make([]int64, rounds)
		for i := range rounds {
			ids[i] = wfInsert(t, w, task(name("f", i)), task(name("d", i)), task(name("r", i), name("f", i), name("d", i)))
		}
		got := claimTasks(t, b)
		if len(got) != 2*rounds {
			t.Fatalf("claimed %d jobs, want %d", len(got), 2*rounds)
		}
		fails := make([]backend.Outcome, rounds)
		for i := range rounds {
			fails[i] = fail(got[name("f", i)].Ref(), "broke")
		}
		completeFresh(t, b, fails...)
		// Four pairs at a time, the two calls of a pair let go together.
		slots := make(chan struct{}, 4)
		var pairs sync.WaitGroup
		for i := range rounds {
			slots <- struct{}{}
			end := done(got[name("d", i)].Ref())
			if i%2 == 1 {
				end = fail(got[name("d", i)].Ref(), "d broke")
			}
			// One side starts a little after the other, by a step that
			// varies from pair to pair, so that some pair's end begins
			// while the replay holds its locks whatever each call's
			// round trips cost on this store.
			lag := time.Duration(i%21-10) * 200 * time.Microsecond
			start := make(chan struct{})
			var pair sync.WaitGroup
			pair.Go(func() {
				<-start
				if lag < 0 {
					time.Sleep(-lag)
				}
				if res, err := b.FailedReplay(t.Context(), backend.FailedReplayParams{IDs: []int64{got[name("f", i)].ID}}); err != nil || res.Replayed != 1 {
					t.Errorf("replay of f%d: %+v, %v; want 1 replayed", i, res, err)
				}
			})
			pair.Go(func() {
				<-start
				if lag > 0 {
					time.Sleep(lag)
				}
				if res, err := b.JobComplete(t.Context(), backend.CompleteParams{Outcomes: []backend.Outcome{end}}); err != nil || len(res.Stale) != 0 {
					t.Errorf("end of d%d: %+v, %v", i, res, err)
				}
			})
			close(start)
			pairs.Go(func() {
				pair.Wait()
				<-slots
			})
		}
		pairs.Wait()
		if t.Failed() {
			t.FailNow()
		}
		for i, id := range ids {
			wf := wfGet(t, w, id)
			r := taskNamed(t, wf, name("r", i))
			if i%2 == 0 && (r.State != backend.TaskWaiting || strings.Join(r.WaitingOn, ",") != name("f", i)) {
				t.Errorf("workflow %d: d succeeded during f's replay, r is %s waiting on %v (reason %q); want waiting on f alone", id, r.State, r.WaitingOn, r.Reason)
			}
			if want := backend.DepCancelReason(name("d", i), backend.TaskFailed); i%2 == 1 && (r.State != backend.TaskCancelled || r.Reason != want) {
				t.Errorf("workflow %d: d failed during f's replay, r is %s (reason %q); want cancelled, %q", id, r.State, r.Reason, want)
			}
		}
		noDrift(t, w)
		if t.Failed() {
			t.FailNow()
		}
		// Every f runs again and succeeds: each r whose d succeeded is
		// released and runs; the others' workflows end failed.
		var fs, rs []string
		for i := range rounds {
			fs = append(fs, name("f", i))
			if i%2 == 0 {
				rs = append(rs, name("r", i))
			}
		}
		runTasks(t, b, fs...)
		runTasks(t, b, rs...)
		for i, id := range ids {
			want := backend.WorkflowSucceeded
			if i%2 == 1 {
				want = backend.WorkflowFailed
			}
			wantWorkflow(t, w, id, want)
		}
		noDrift(t, w)
	})

	parallel(t, h, "CompletionTwice", func(t *testing.T, b backend.Backend) {
		// The last dependency's done arrives twice in one batch and again
		// later (a retried call): it releases the dependant once.
		w := workflower(t, b)
		id := wfInsert(t, w, task("a"), task("b", "a"), continueOn(task("c"), "a"))
		r := claimOne(t, b, "w")
		res := complete(t, b, done(r.Ref()), done(r.Ref()))
		if len(res.Stale) != 1 {
			t.Fatalf("done twice in one batch: %+v, want the second stale", res)
		}
		if res := complete(t, b, done(r.Ref())); len(res.Stale) != 1 {
			t.Fatalf("done again: %+v, want stale", res)
		}
		if res := complete(t, b, fail(r.Ref(), "late")); len(res.Stale) != 1 {
			t.Fatalf("a late fail: %+v, want stale", res)
		}
		wantTasks(t, w, id, map[string]backend.TaskState{"a": backend.TaskSucceeded, "b": backend.TaskActive, "c": backend.TaskActive})
		runTasks(t, b, "b", "c")
		wantWorkflow(t, w, id, backend.WorkflowSucceeded)
	})
}
