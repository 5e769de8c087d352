package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestKeyQueryPlans pins the per-key lookups to the partial indexes of
// migration 010: each is a probe (per priority of the key, for jobs_key),
// never a scan of a key's backlog or of the queue; the halt's lookup of
// the jobs it cancels reads the key's.
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
		{"max turns of keys", qKeysMaxTurn, []any{"q", `["k","l"]`},
			[]string{"jobs_key (queue=? AND key=? AND priority=?)", "INTEGER PRIMARY KEY (rowid=?)"}, []string{"SCAN jobs", "SCAN j "}},
		{"lowest pending turn of a queue", qQueueMinTurn, []any{"q"},
			[]string{"jobs_claim (queue=? AND priority=? AND turn>?)"}, []string{"SCAN jobs", "SCAN j ", "TEMP B-TREE"}},
		{"walk of a queue with key rules", qKeyWalk, []any{"q", now, 100},
			[]string{"USING COVERING INDEX jobs_claim (queue=?)"}, []string{"TEMP B-TREE", "SCAN"}},
		{"reserved jobs of the keys", qKeyReserved, []any{"q"},
			[]string{"USING COVERING INDEX jobs_key_reserved (queue=? AND key>?)"}, []string{"SCAN", "TEMP B-TREE"}},
		{"head of a key", qKeyHead, []any{"q", "k"},
			[]string{"jobs_key (queue=? AND key=? AND priority=?)"}, []string{"TEMP B-TREE", "SCAN jobs", "SCAN j "}},
		{"lower live job of a key", qKeyLower, []any{"q", "k", 10},
			[]string{"jobs_key (queue=? AND key=? AND priority=? AND id<?)"}, []string{"SCAN jobs", "SCAN j ", "TEMP B-TREE"}},
		{"priorities of a key", qKeyPriorities, []any{"q", "k"},
			[]string{"jobs_key (queue=? AND key=?)", "jobs_key (queue=? AND key=? AND priority<?)"}, []string{"SCAN jobs", "SCAN j ", "TEMP B-TREE"}},
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
		{"due jobs of a key", qKeyDue, []any{"q", "k", 0, now, 10},
			[]string{"jobs_key (queue=? AND key=? AND priority=?)"}, []string{"TEMP B-TREE", "SCAN jobs"}},
		{"pending jobs after a head", qKeyPendingAfter, []any{"q", "k", 10},
			[]string{"jobs_key (queue=? AND key=?)"}, []string{"SCAN jobs"}},
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
