package verify

import (
	"strconv"
	"strings"
	"testing"

	"github.com/jobq/jobq/backend"
)

// keyed is a final state of the keyed workload in which jobs ids were
// acknowledged, on the queues "q1" (key limit 1), "q2" (limit 2) and
// "qo" (ordered).
func keyed(ids ...int64) finalState {
	fs := acked(ids...)
	fs.keys = &keyFinal{rules: map[string]backend.KeyRules{
		"q1": {Limit: 1}, "q2": {Limit: 2}, "qo": {Ordered: true},
	}}
	return fs
}

// keyJob is the history of one clean attempt of job id on key key of
// queue q: claimed at t, started at t+1, ended at t+dur, its outcome
// written (kind) at t+dur+1.
func keyJob(proc string, id int64, q, key string, t, dur int64, tok int64, kind string) string {
	res := "ok"
	switch kind {
	case "retry":
		res = "error"
	case "failed":
		res = "permanent"
	}
	return strings.Join([]string{
		itoa(t) + " claim proc=" + proc + " job=" + itoa(id) + " att=1 tok=" + itoa(tok),
		itoa(t+1) + " start proc=" + proc + " job=" + itoa(id) + " seq=" + itoa(id) + " att=1 tok=" + itoa(tok) + " kq=" + q + " key=" + key + " kpos=" + itoa(id),
		itoa(t+dur) + " end proc=" + proc + " job=" + itoa(id) + " att=1 tok=" + itoa(tok) + " res=" + res,
		itoa(t+dur+1) + " written proc=" + proc + " job=" + itoa(id) + " att=1 tok=" + itoa(tok) + " kind=" + kind,
	}, "\n")
}

func TestCheckKeysClean(t *testing.T) {
	// Key a of q2 runs two at once (its limit), key b of q1 one at a
	// time; ordered key o runs 5, 6, 7 in turn.
	rep := verdict(t, map[string]string{
		"w0.0.log": keyJob("w0.0", 1, "q2", "a", 100, 50, 1, "done") + "\n" +
			keyJob("w0.0", 3, "q1", "b", 100, 50, 1, "done") + "\n" +
			keyJob("w0.0", 5, "qo", "o", 100, 50, 1, "done") + "\n" +
			keyJob("w0.0", 7, "qo", "o", 300, 50, 1, "done"),
		"w1.0.log": keyJob("w1.0", 2, "q2", "a", 120, 50, 1, "done") + "\n" +
			keyJob("w1.0", 4, "q1", "b", 160, 50, 1, "done") + "\n" +
			keyJob("w1.0", 6, "qo", "o", 200, 50, 1, "done"),
	}, keyed(1, 2, 3, 4, 5, 6, 7))
	wantAnomalies(t, rep, nil)
	if rep.Keys != 3 || rep.KeyMostRunning[1] != 1 || rep.KeyMostRunning[2] != 2 || rep.OrderedKeys != 1 || rep.OrderedMostRunning != 1 || rep.OrderedDone != 3 {
		t.Errorf("keys %d, most running %v, ordered keys %d (most %d, done %d); want 3, map[1:1 2:2], 1 (1, 3)",
			rep.Keys, rep.KeyMostRunning, rep.OrderedKeys, rep.OrderedMostRunning, rep.OrderedDone)
	}
}

func TestCheckKeyOverLimit(t *testing.T) {
	// Three attempts of key a of q2 (limit 2) ran at once, all applied;
	// on q1 a zombie's attempt (refused) overlapped its successor: fine.
	rep := verdict(t, map[string]string{
		"w0.0.log": keyJob("w0.0", 1, "q2", "a", 100, 50, 1, "done") + "\n" +
			keyJob("w0.0", 2, "q2", "a", 110, 50, 1, "done") + `
			100 claim proc=w0.0 job=4 att=1 tok=1
			101 start proc=w0.0 job=4 seq=4 att=1 tok=1 kq=q1 key=b kpos=0
			400 end proc=w0.0 job=4 att=1 tok=1 res=lease-lost
			401 stale proc=w0.0 job=4 att=1 tok=1`,
		"w1.0.log": keyJob("w1.0", 3, "q2", "a", 120, 50, 1, "done") + `
			300 claim proc=w1.0 job=4 att=2 tok=2
			301 start proc=w1.0 job=4 seq=4 att=2 tok=2 kq=q1 key=b kpos=0
			310 end proc=w1.0 job=4 att=2 tok=2 res=ok
			311 written proc=w1.0 job=4 att=2 tok=2 kind=done` + "\n" +
			keyJob("w1.0", 5, "q1", "b", 320, 50, 1, "done"),
	}, keyed(1, 2, 3, 4, 5))
	wantAnomalies(t, rep, map[string]int{AnomalyKeyOverLimit: 1})
	if a := rep.Anomalies[0]; !strings.Contains(a.Detail, "key a of queue q2 (limit 2): 3 attempts ran at once") || len(a.Lines) != 12 {
		t.Errorf("anomaly %+v: want the 3 attempts and their 12 lines", a)
	}
	if rep.KeyMostRunning[2] != 3 || rep.KeyMostRunning[1] != 1 {
		t.Errorf("most running %v, want map[1:1 2:3]", rep.KeyMostRunning)
	}
}

func TestCheckKeyOrdered(t *testing.T) {
	for _, tc := range []struct {
		name string
		w0   string
		want map[string]int
	}{
		// Job 6 ran while job 5 still ran.
		{"overlap", keyJob("w0.0", 5, "qo", "o", 100, 50, 1, "done") + "\n" + keyJob("w0.0", 6, "qo", "o", 120, 50, 1, "done"),
			map[string]int{AnomalyKeyOverlap: 1}},
		// Job 6 ran, and completed, before job 5 started.
		{"overtaken", keyJob("w0.0", 6, "qo", "o", 100, 50, 1, "done") + "\n" + keyJob("w0.0", 5, "qo", "o", 200, 50, 1, "done"),
			map[string]int{AnomalyKeyOrder: 1}},
		// In order: no anomaly.
		{"in order", keyJob("w0.0", 5, "qo", "o", 100, 50, 1, "done") + "\n" + keyJob("w0.0", 6, "qo", "o", 200, 50, 1, "done"),
			nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := verdict(t, map[string]string{"w0.0.log": tc.w0}, keyed(5, 6))
			wantAnomalies(t, rep, tc.want)
		})
	}
}

func TestCheckKeyOrderDone(t *testing.T) {
	// Job 6's done was applied (its hook heard so at 181) before job 5's
	// handler returned (at 190): 6 completed first, though it started
	// after 5 (an unfenced overlap of the key as well).
	rep := verdict(t, map[string]string{
		"w0.0.log": keyJob("w0.0", 5, "qo", "o", 100, 90, 1, "done"),
		"w1.0.log": keyJob("w1.0", 6, "qo", "o", 150, 30, 1, "done"),
	}, keyed(5, 6))
	wantAnomalies(t, rep, map[string]int{AnomalyKeyOverlap: 1, AnomalyKeyOrder: 1})
	found := false
	for _, a := range rep.Anomalies {
		found = found || a.Kind == AnomalyKeyOrder && strings.Contains(a.Detail, "job 6 (place 6) completed before job 5")
	}
	if !found {
		t.Errorf("no completion-order anomaly: %+v", rep.Anomalies)
	}
}

func TestCheckKeyReplayedHead(t *testing.T) {
	// Job 5, the head of ordered key o, failed for good and held the
	// key; the verifier replayed it, it ran again first, then job 6 ran.
	// Job 8, the last of key p, failed and holds its key, listed.
	fs := keyed(5, 6, 8)
	fs.failed = []*backend.FailedJob{{ID: 2, JobID: 8, Queue: "qo", Error: "permanent: verify: failed on purpose"}}
	fs.stats.Failed = 1
	fs.keys.held = []backend.KeyInfo{{Queue: "qo", Key: "p", Held: true, HeadID: 8}}
	rep := verdict(t, map[string]string{
		"w0.0.log": keyJob("w0.0", 5, "qo", "o", 100, 20, 1, "failed") + "\n" +
			keyJob("w0.0", 5, "qo", "o", 200, 20, 2, "done") + "\n" +
			keyJob("w0.0", 6, "qo", "o", 300, 20, 1, "done") + "\n" +
			keyJob("w0.0", 8, "qo", "p", 100, 20, 1, "failed"),
		"verifier.log": `
			150 key-replay proc=verifier job=5 kq=qo key=o res=replayed`,
	}, fs)
	wantAnomalies(t, rep, nil)
	if rep.KeyReplayed != 1 || rep.KeysHeld != 1 || rep.Done != 2 || rep.Failed != 1 || rep.OrderedDone != 2 {
		t.Errorf("replayed %d, held %d, done %d, failed %d, ordered done %d; want 1, 1, 2, 1, 2", rep.KeyReplayed, rep.KeysHeld, rep.Done, rep.Failed, rep.OrderedDone)
	}

	// Without the replay the head's second run came after its end.
	rep = verdict(t, map[string]string{
		"w0.0.log": keyJob("w0.0", 5, "qo", "o", 100, 20, 1, "failed") + "\n" +
			keyJob("w0.0", 5, "qo", "o", 200, 20, 2, "done"),
	}, keyed(5))
	wantAnomalies(t, rep, map[string]int{AnomalyRanAfterEnd: 1})

	// A key held by a head that is not among the failed jobs.
	fs = keyed(5)
	fs.keys.held = []backend.KeyInfo{{Queue: "qo", Key: "o", Held: true, HeadID: 5, Pending: 1}}
	rep = verdict(t, map[string]string{"w0.0.log": keyJob("w0.0", 5, "qo", "o", 100, 20, 1, "done")}, fs)
	wantAnomalies(t, rep, map[string]int{AnomalyKeyHeld: 1})
	if a := rep.Anomalies[0]; a.Job != 5 || !strings.Contains(a.Detail, "held by job 5, which is not among the failed jobs") || len(a.Lines) != 4 {
		t.Errorf("anomaly %+v", a)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
