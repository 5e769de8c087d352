package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKeyQueryPlans pins the per-key lookups to the partial indexes of
// migration 010: each is a probe, never a scan of a key's backlog or of
// the queue.
func TestKeyQueryPlans(t *testing.T) {
	t.Parallel()
	b, err := Open(t.Context(), filepath.Join(t.TempDir(), "plan.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now().UnixMicro()
	for _, c := range []struct {
		name, query string
		args        []any
		want        []string // substrings the plan must contain
		not         []string // substrings it must not contain
	}{
		{"max turn of a key", qKeyMaxTurn, []any{"q", "k"},
			[]string{"jobs_key (queue=? AND key=?)"}, []string{"SCAN jobs", "TEMP B-TREE"}},
		{"lowest pending turn of a queue", qQueueMinTurn, []any{"q"},
			[]string{"jobs_turn (queue=?)"}, []string{"SCAN"}},
		{"walk of a queue with key rules", qKeyWalk, []any{"q", now, 100},
			[]string{"USING COVERING INDEX jobs_claim (queue=?)"}, []string{"TEMP B-TREE", "SCAN"}},
		{"reserved jobs of the keys", qKeyReserved, []any{"q"},
			[]string{"USING COVERING INDEX jobs_key_reserved (queue=? AND key>?)"}, []string{"SCAN", "TEMP B-TREE"}},
		{"head of a key", qKeyHead, []any{"q", "k"},
			[]string{"jobs_key (queue=? AND key=?)"}, []string{"TEMP B-TREE", "SCAN"}},
		{"lower live job of a key", qKeyLower, []any{"q", "k", 10},
			[]string{"jobs_key (queue=? AND key=? AND id<?)"}, []string{"SCAN"}},
		{"failed job of a key", qKeyFailed, []any{"q", "k"},
			[]string{"failed_jobs_key (queue=? AND key=?)"}, []string{"SCAN"}},
		{"claim by IDs", qClaimIDs, []any{now, now, "[1,2]"},
			[]string{"USING INTEGER PRIMARY KEY (rowid=?)"}, []string{"SCAN jobs"}},
		{"keys of a queue", qQueueKeys, []any{"q"},
			[]string{"jobs_key (queue=? AND key>?)"}, []string{"SCAN jobs", "SCAN j "}},
		{"priorities of a queue", qQueuePriorities, []any{"q"},
			[]string{"jobs_claim (queue=?)", "jobs_claim (queue=? AND priority<?)"}, []string{"SCAN jobs", "SCAN j "}},
		{"due jobs without a key", qUnkeyedDue, []any{"q", 0, now, 10},
			[]string{"jobs_claim (queue=? AND priority=? AND turn=? AND available_at<?)"}, []string{"TEMP B-TREE"}},
		{"due jobs of a key", qKeyDue, []any{"q", "k", now, 10},
			[]string{"jobs_key (queue=? AND key=?)"}, []string{"SCAN jobs"}},
		{"pending jobs after a head", qKeyPendingAfter, []any{"q", "k", 10},
			[]string{"jobs_key (queue=? AND key=? AND id>?)"}, []string{"TEMP B-TREE"}},
	} {
		plan := queryPlan(t, b, c.query, c.args...)
		for _, s := range c.want {
			if !strings.Contains(plan, s) {
				t.Errorf("%s: plan lacks %q:\n%s", c.name, s, plan)
			}
		}
		for _, s := range c.not {
			if strings.Contains(plan, s) {
				t.Errorf("%s: plan has %q:\n%s", c.name, s, plan)
			}
		}
		t.Logf("%s:\n%s", c.name, plan)
	}
}
