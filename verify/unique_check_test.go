package verify

import "testing"

// uniqueFS is a final state of the unique workload in which the jobs of
// seqs (job ID = seq) were acknowledged at the times ack gives, and every
// seq asks for identity seq modulo 2.
func uniqueFS(ack map[int64]int64) finalState {
	fs := finalState{acked: map[int64]int64{}, unique: &uniqueFinal{identity: func(seq int64) int64 { return seq % 2 }, ackMono: ack}}
	for id := range ack {
		fs.acked[id] = id
	}
	return fs
}

// uniqueJob is one attempt of job id (seq id) from t, written as kind.
func uniqueJob(id, t int64, kind string) string {
	return itoa(t) + " claim proc=w0.0 job=" + itoa(id) + " att=1 tok=" + itoa(id) + "\n" +
		itoa(t+1) + " start proc=w0.0 job=" + itoa(id) + " seq=" + itoa(id) + " att=1 tok=" + itoa(id) + "\n" +
		itoa(t+10) + " end proc=w0.0 job=" + itoa(id) + " att=1 tok=" + itoa(id) + " res=ok\n" +
		itoa(t+11) + " written proc=w0.0 job=" + itoa(id) + " att=1 tok=" + itoa(id) + " kind=" + kind + "\n"
}

// TestCheckUniqueOneLive: jobs 1 and 3 of identity 1 one after the other,
// and job 2 of identity 0 beside them, hold; the report counts the
// identity made again.
func TestCheckUniqueOneLive(t *testing.T) {
	rep := verdict(t, map[string]string{
		"w0.0.log": uniqueJob(1, 100, "done") + uniqueJob(2, 105, "done") + uniqueJob(3, 200, "done"),
	}, uniqueFS(map[int64]int64{1: 90, 2: 95, 3: 150}))
	wantAnomalies(t, rep, nil)
	if rep.UniqueIdentities != 2 || rep.UniqueRemade != 1 {
		t.Errorf("identities %d, remade %d; want 2, 1", rep.UniqueIdentities, rep.UniqueRemade)
	}
}

// TestCheckUniqueTwoLive: job 3 of identity 1 was acknowledged (so
// inserted) while job 1 of that identity was still to run: both lived
// then, though their handlers never overlapped.
func TestCheckUniqueTwoLive(t *testing.T) {
	rep := verdict(t, map[string]string{
		"w0.0.log": uniqueJob(1, 100, "done") + uniqueJob(3, 200, "done"),
	}, uniqueFS(map[int64]int64{1: 90, 3: 95}))
	wantAnomalies(t, rep, map[string]int{AnomalyUniqueTwoLive: 1})
}

// TestCheckUniqueStaleHolderProvesNothing: job 1's first holder was
// refused (its lease ran out and a second holder ended the job), so its
// handler running on beside job 3 proves no overlap.
func TestCheckUniqueStaleHolderProvesNothing(t *testing.T) {
	rep := verdict(t, map[string]string{
		"w0.0.log": `
			100 claim proc=w0.0 job=1 att=1 tok=11
			101 start proc=w0.0 job=1 seq=1 att=1 tok=11
			400 end proc=w0.0 job=1 att=1 tok=11 res=ok
			401 stale proc=w0.0 job=1 att=1 tok=11`,
		"w0.1.log": `
			200 claim proc=w0.1 job=1 att=2 tok=12
			201 start proc=w0.1 job=1 seq=1 att=2 tok=12
			210 end proc=w0.1 job=1 att=2 tok=12 res=ok
			211 written proc=w0.1 job=1 att=2 tok=12 kind=done
` + uniqueJob(3, 300, "done"),
	}, uniqueFS(map[int64]int64{1: 90, 3: 250}))
	wantAnomalies(t, rep, map[string]int{AnomalyUnfencedOverlap: 0})
}
