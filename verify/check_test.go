package verify

import (
	"strconv"
	"strings"
	"testing"

	"github.com/jobq/jobq/backend"
)

// verdict checks a hand-made history (file name to lines; times are
// plain numbers) against the backend's final state, for a run "r1" whose
// jobs allow 3 attempts.
func verdict(t *testing.T, files map[string]string, fs finalState) *Report {
	t.Helper()
	recs, err := parseHistoryText(files)
	if err != nil {
		t.Fatal(err)
	}
	if fs.live == nil {
		fs.live = map[int64]*backend.JobRow{}
	}
	rep := &Report{Injected: map[string]int{}, anomalyCount: map[string]int{}}
	check(recs, fs, 3, "r1", 20, rep)
	return rep
}

// acked is a final state in which jobs ids were acknowledged (seq = id)
// and nothing is live or failed.
func acked(ids ...int64) finalState {
	fs := finalState{acked: map[int64]int64{}}
	for _, id := range ids {
		fs.acked[id] = id
	}
	return fs
}

// wantAnomalies fails unless rep found exactly these kinds (with counts).
func wantAnomalies(t *testing.T, rep *Report, want map[string]int) {
	t.Helper()
	for kind, n := range want {
		if got := rep.AnomalyCount(kind); got != n {
			t.Errorf("%s anomalies = %d, want %d", kind, got, n)
		}
	}
	total := 0
	for _, n := range want {
		total += n
	}
	if got := rep.AnomalyCount(""); got != total {
		t.Errorf("anomalies = %d (%s), want %d", got, rep.kindCounts(), total)
	}
	if rep.OK() != (total == 0) {
		t.Errorf("OK() = %v with %d anomalies", rep.OK(), total)
	}
	if t.Failed() {
		var b strings.Builder
		_ = rep.WriteTable(&b)
		t.Log("\n" + b.String())
	}
}

func TestCheckCleanJob(t *testing.T) {
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=11
			110 start proc=w0.0 job=1 seq=1 att=1 tok=11
			120 end proc=w0.0 job=1 att=1 tok=11 res=error
			130 written proc=w0.0 job=1 att=1 tok=11 kind=retry
			200 claim proc=w0.0 job=1 att=2 tok=12
			210 start proc=w0.0 job=1 seq=1 att=2 tok=12
			220 end proc=w0.0 job=1 att=2 tok=12 res=ok
			230 written proc=w0.0 job=1 att=2 tok=12 kind=done
			300 down proc=w0.0`,
	}, acked(1))
	wantAnomalies(t, rep, nil)
	if rep.Done != 1 || rep.Attempts != 2 || rep.Reruns != 1 || rep.Concurrent != 0 || !rep.Tokens {
		t.Errorf("done %d, attempts %d, reruns %d, concurrent %d, tokens %v; want 1, 2, 1, 0, true", rep.Done, rep.Attempts, rep.Reruns, rep.Concurrent, rep.Tokens)
	}
}

func TestCheckLostJob(t *testing.T) {
	// Job 1 failed once and was never seen again; job 2 was never
	// claimed. Both are gone from the backend and not in failed jobs.
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=1
			110 start proc=w0.0 job=1 seq=1 att=1 tok=1
			120 end proc=w0.0 job=1 att=1 tok=1 res=error
			130 written proc=w0.0 job=1 att=1 tok=1 kind=retry`,
	}, acked(1, 2))
	wantAnomalies(t, rep, map[string]int{AnomalyLost: 2})
	if len(rep.Anomalies) == 0 || len(rep.Anomalies[0].Lines) != 4 {
		t.Errorf("the lost job's anomaly should show its 4 history lines: %+v", rep.Anomalies)
	}
}

func TestCheckNotLost(t *testing.T) {
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=1
			110 start proc=w0.0 job=1 seq=1 att=1 tok=1
			120 end proc=w0.0 job=1 att=1 tok=1 res=ok
			140 claim proc=w0.0 job=3 att=1 tok=1
			150 start proc=w0.0 job=3 seq=3 att=1 tok=1
			160 end proc=w0.0 job=3 att=1 tok=1 res=ok
			161 werr proc=w0.0 job=3 att=1 tok=1 op=complete err=unavailable
			170 stale proc=w0.0 job=3 att=1 tok=1`,
		"verifier.log": `
			50 spawn proc=verifier worker=w0.0 pid=7
			125 kill proc=verifier worker=w0.0 pid=7
			126 exit proc=verifier worker=w0.0 pid=7 status=killed killed=true`,
	}, func() finalState {
		fs := acked(1, 2, 3)
		// Job 2 failed for good, with its reason.
		fs.failed = []*backend.FailedJob{{ID: 9, JobID: 2, Error: "permanent: verify: failed on purpose", Payload: []byte(`{"run":"r1","seq":2}`)}}
		fs.stats.Failed = 1
		return fs
	}())
	// Job 1 succeeded and its process died before it heard back: done,
	// unconfirmed. Job 3's refusal came after a failed try that may have
	// been applied: done, unconfirmed too.
	wantAnomalies(t, rep, nil)
	if rep.DoneUnconfirmed != 2 || rep.Failed != 1 || rep.FailedOnPurpose != 1 || rep.MaybeApplied != 1 {
		t.Errorf("done unconfirmed %d, failed %d (on purpose %d), maybe applied %d; want 2, 1 (1), 1", rep.DoneUnconfirmed, rep.Failed, rep.FailedOnPurpose, rep.MaybeApplied)
	}
}

// pausedHolder is the history of a job whose first holder (w0.0) was
// paused past its lease while w1.0 took it over; outcome0 and outcome1
// are what became of each claim's outcome.
func pausedHolder(outcome0, outcome1 string) map[string]string {
	return map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=1
			110 start proc=w0.0 job=1 seq=1 att=1 tok=1
			900 end proc=w0.0 job=1 att=1 tok=1 res=ok
			` + outcome0,
		"w1.0.log": `
			500 claim proc=w1.0 job=1 att=2 tok=2
			510 start proc=w1.0 job=1 seq=1 att=2 tok=2
			950 end proc=w1.0 job=1 att=2 tok=2 res=ok
			` + outcome1,
		"verifier.log": `
			200 pause proc=verifier worker=w0.0 pid=7
			890 resume proc=verifier worker=w0.0 pid=7`,
	}
}

func TestCheckUnfencedOverlap(t *testing.T) {
	rep := verdict(t, pausedHolder(
		"910 written proc=w0.0 job=1 att=1 tok=1 kind=done",
		"960 stale proc=w1.0 job=1 att=2 tok=2",
	), acked(1))
	wantAnomalies(t, rep, map[string]int{AnomalyUnfencedOverlap: 1})
	a := rep.Anomalies[0]
	joined := strings.Join(a.Lines, "\n")
	for _, want := range []string{"w0.0.log:4: 910 written", "w1.0.log:2: 510 start", "verifier.log:1: 200 pause", "verifier.log:2: 890 resume"} {
		if !strings.Contains(joined, want) {
			t.Errorf("the anomaly's lines lack %q:\n%s", want, joined)
		}
	}
	if a.Job != 1 || !strings.Contains(a.Detail, "stale write was applied") {
		t.Errorf("anomaly = %+v", a)
	}
}

func TestCheckUnfencedRetryOverlap(t *testing.T) {
	// Any applied outcome of the earlier claim counts, a retry too.
	rep := verdict(t, pausedHolder(
		"910 written proc=w0.0 job=1 att=1 tok=1 kind=retry",
		"960 written proc=w1.0 job=1 att=2 tok=2 kind=done",
	), acked(1))
	wantAnomalies(t, rep, map[string]int{AnomalyUnfencedOverlap: 1})
}

func TestCheckFencedOverlapIsFine(t *testing.T) {
	rep := verdict(t, pausedHolder(
		"910 stale proc=w0.0 job=1 att=1 tok=1",
		"960 written proc=w1.0 job=1 att=2 tok=2 kind=done",
	), acked(1))
	wantAnomalies(t, rep, nil)
	if rep.Concurrent != 1 || rep.Refused != 1 || rep.OKTwice != 1 || rep.Done != 1 {
		t.Errorf("concurrent %d, refused %d, ok twice %d, done %d; want 1 each", rep.Concurrent, rep.Refused, rep.OKTwice, rep.Done)
	}
}

func TestCheckKilledHolderDoesNotOverlap(t *testing.T) {
	// The first holder was killed mid-handler: its attempt ends at its
	// exit, before the rescue's claim, so the two never overlapped.
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=1
			110 start proc=w0.0 job=1 seq=1 att=1 tok=1`,
		"w1.0.log": `
			500 claim proc=w1.0 job=1 att=2 tok=2
			510 start proc=w1.0 job=1 seq=1 att=2 tok=2
			520 end proc=w1.0 job=1 att=2 tok=2 res=ok
			530 written proc=w1.0 job=1 att=2 tok=2 kind=done`,
		"verifier.log": `
			200 kill proc=verifier worker=w0.0 pid=7
			201 exit proc=verifier worker=w0.0 pid=7 status=killed killed=true`,
	}, acked(1))
	wantAnomalies(t, rep, nil)
	if rep.Concurrent != 0 {
		t.Errorf("concurrent = %d, want 0", rep.Concurrent)
	}
}

func TestCheckDoubleDone(t *testing.T) {
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=1
			110 start proc=w0.0 job=1 seq=1 att=1 tok=1
			120 end proc=w0.0 job=1 att=1 tok=1 res=ok
			130 written proc=w0.0 job=1 att=1 tok=1 kind=done`,
		"w1.0.log": `
			200 claim proc=w1.0 job=1 att=2 tok=2
			210 start proc=w1.0 job=1 seq=1 att=2 tok=2
			220 end proc=w1.0 job=1 att=2 tok=2 res=ok
			230 written proc=w1.0 job=1 att=2 tok=2 kind=done`,
	}, acked(1))
	// Done twice, and claimed again after it was done.
	wantAnomalies(t, rep, map[string]int{AnomalyDoubleDone: 1, AnomalyRanAfterEnd: 1})
}

func TestCheckDoneAndFailed(t *testing.T) {
	fs := acked(1)
	fs.failed = []*backend.FailedJob{{ID: 5, JobID: 1, Error: "lease expired"}}
	fs.stats.Failed = 1
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=1
			110 start proc=w0.0 job=1 seq=1 att=1 tok=1
			120 end proc=w0.0 job=1 att=1 tok=1 res=ok
			130 written proc=w0.0 job=1 att=1 tok=1 kind=done`,
	}, fs)
	wantAnomalies(t, rep, map[string]int{AnomalyDoneAndFailed: 1})
}

func TestCheckTooManyAttempts(t *testing.T) {
	// Allowance 3 attempts + 3 free releases: 7 claims is one too many.
	var b strings.Builder
	for i := 1; i <= 7; i++ {
		t0 := i * 100
		b.WriteString(strings.NewReplacer("T0", strconv.Itoa(t0), "T1", strconv.Itoa(t0+10), "T2", strconv.Itoa(t0+20), "T3", strconv.Itoa(t0+30), "A", strconv.Itoa(min(i, 3)), "K", strconv.Itoa(i)).Replace(`
			T0 claim proc=w0.0 job=1 att=A tok=K
			T1 start proc=w0.0 job=1 seq=1 att=A tok=K
			T2 end proc=w0.0 job=1 att=A tok=K res=error
			T3 written proc=w0.0 job=1 att=A tok=K kind=retry`))
	}
	b.WriteString("\n900 claim proc=w0.0 job=1 att=3 tok=8\n910 start proc=w0.0 job=1 seq=1 att=3 tok=8\n920 end proc=w0.0 job=1 att=3 tok=8 res=ok\n930 written proc=w0.0 job=1 att=3 tok=8 kind=done")
	rep := verdict(t, map[string]string{"w0.0.log": b.String()}, acked(1))
	wantAnomalies(t, rep, map[string]int{AnomalyTooManyAttempts: 1})
	if rep.MostAttempts != 8 {
		t.Errorf("most attempts = %d, want 8", rep.MostAttempts)
	}
}

func TestCheckTokenReused(t *testing.T) {
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=4
			110 start proc=w0.0 job=1 seq=1 att=1 tok=4
			120 end proc=w0.0 job=1 att=1 tok=4 res=error
			130 written proc=w0.0 job=1 att=1 tok=4 kind=retry`,
		"w1.0.log": `
			200 claim proc=w1.0 job=1 att=2 tok=4
			210 start proc=w1.0 job=1 seq=1 att=2 tok=4
			220 end proc=w1.0 job=1 att=2 tok=4 res=ok
			230 written proc=w1.0 job=1 att=2 tok=4 kind=done`,
	}, acked(1))
	wantAnomalies(t, rep, map[string]int{AnomalyTokenReused: 1})
}

func TestCheckWithoutTokens(t *testing.T) {
	// A backend that gives no tokens yet: claims are told apart, and
	// ordered, by attempt number.
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=0
			110 start proc=w0.0 job=1 seq=1 att=1 tok=0
			900 end proc=w0.0 job=1 att=1 tok=0 res=ok
			910 written proc=w0.0 job=1 att=1 tok=0 kind=done`,
		"w1.0.log": `
			500 claim proc=w1.0 job=1 att=2 tok=0
			510 start proc=w1.0 job=1 seq=1 att=2 tok=0
			950 end proc=w1.0 job=1 att=2 tok=0 res=ok
			960 stale proc=w1.0 job=1 att=2 tok=0`,
	}, acked(1))
	wantAnomalies(t, rep, map[string]int{AnomalyUnfencedOverlap: 1})
	if rep.Tokens {
		t.Error("Tokens = true for a history without tokens")
	}
}

func TestCheckNotFinishedAndCounts(t *testing.T) {
	fs := acked(1)
	fs.live = map[int64]*backend.JobRow{1: {ID: 1, Status: backend.StatePending, Attempts: 1, MaxAttempts: 3}}
	fs.stats.Pending = 1
	// A failed job nobody enqueued, and a failed count that disagrees.
	fs.failed = []*backend.FailedJob{{ID: 7, JobID: 99, Error: "x", Payload: []byte(`{"run":"other","seq":1}`)}}
	fs.stats.Failed = 2
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=1
			110 start proc=w0.0 job=1 seq=1 att=1 tok=1
			120 end proc=w0.0 job=1 att=1 tok=1 res=error
			130 written proc=w0.0 job=1 att=1 tok=1 kind=retry`,
	}, fs)
	wantAnomalies(t, rep, map[string]int{AnomalyNotFinished: 1, AnomalyCounts: 2, AnomalyUnknownFailed: 1})
}

func TestCheckExtraJobs(t *testing.T) {
	// Job 5 came from a batch whose first reply was lost: never
	// acknowledged, seen only in the history; it is checked all the same
	// but cannot be lost.
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=5 att=1 tok=1
			110 start proc=w0.0 job=5 seq=1 att=1 tok=1
			120 end proc=w0.0 job=5 att=1 tok=1 res=error
			130 written proc=w0.0 job=5 att=1 tok=1 kind=retry`,
	}, finalState{acked: map[int64]int64{}})
	wantAnomalies(t, rep, nil)
	if rep.Extra != 1 || rep.Enqueued != 0 {
		t.Errorf("extra %d, enqueued %d; want 1, 0", rep.Extra, rep.Enqueued)
	}
}

func TestAnomalyListCapped(t *testing.T) {
	recs, err := parseHistoryText(map[string]string{"verifier.log": "1 spawn proc=verifier worker=w0.0 pid=1"})
	if err != nil {
		t.Fatal(err)
	}
	rep := &Report{Injected: map[string]int{}, anomalyCount: map[string]int{}}
	check(recs, acked(1, 2, 3, 4, 5), 3, "r1", 2, rep)
	if len(rep.Anomalies) != 2 || rep.MoreAnomalies != 3 || rep.AnomalyCount(AnomalyLost) != 5 {
		t.Fatalf("listed %d, more %d, lost %d; want 2, 3, 5", len(rep.Anomalies), rep.MoreAnomalies, rep.AnomalyCount(AnomalyLost))
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "and 3 more anomalies (LOST 5)") {
		t.Errorf("table does not count the anomalies left out:\n%s", b.String())
	}
}
