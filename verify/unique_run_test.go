package verify

import (
	"testing"

	"github.com/jobq/jobq/internal/storetest"
)

// uniqueShort turns a short run into the unique workload: its 150 jobs
// ask for 50 identities, 3 requests each.
func uniqueShort(cfg Config) Config {
	cfg.Unique = 3
	return cfg
}

func TestRunMemoryUnique(t *testing.T) {
	t.Parallel()
	cfg := uniqueShort(short("memory:"))
	cfg.Faults, cfg.WorkerCommand = []Fault{}, nil
	rep := mustVerify(t, cfg)
	if rep.UniqueIdentities != 50 {
		t.Errorf("%d identities ran, want 50", rep.UniqueIdentities)
	}
	if rep.UniqueDuplicates == 0 || rep.UniqueRemade == 0 {
		t.Errorf("%d requests answered as duplicates, %d identities remade: want some of each", rep.UniqueDuplicates, rep.UniqueRemade)
	}
}

func TestRunSQLiteUniqueKill(t *testing.T) {
	t.Parallel()
	rep := mustVerify(t, uniqueShort(short(storetest.Durable[0].URL(t), FaultKill)))
	wantInjected(t, rep, "kill")
	if rep.UniqueIdentities == 0 {
		t.Error("no identity ran")
	}
}
