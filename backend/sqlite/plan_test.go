package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// queryPlan returns EXPLAIN QUERY PLAN's detail lines for query.
func queryPlan(t *testing.T, b *Backend, query string, args ...any) string {
	t.Helper()
	rows, err := b.w.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", query, err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestQueryPlansUseIndexes pins the hot statements to their indexes, so a
// schema or query change cannot silently turn a claim into a table scan.
func TestQueryPlansUseIndexes(t *testing.T) {
	t.Parallel()
	b, err := Open(t.Context(), filepath.Join(t.TempDir(), "plan.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now().UnixMicro()
	cases := []struct {
		name, query string
		args        []any
		want        []string // substrings the plan must contain
		not         []string // substrings it must not contain
	}{
		// A task's job finds its task's name by the partial index (the
		// CASE spares a plain job even that).
		{"claim one queue", claimSQL(1), []any{now, now, 100, "q"},
			[]string{"USING COVERING INDEX jobs_claim (queue=?)", "workflow_tasks_job (job_id=?)"}, []string{"TEMP B-TREE", "SCAN jobs", "SCAN t"}},
		// Each arm searches jobs_claim in order; the temp b-trees of the
		// merge sort at most Max rows per arm, never the backlog.
		{"claim three queues", claimSQL(3), []any{now, now, 100, "a", "b", "c"},
			[]string{"USING COVERING INDEX jobs_claim (queue=?)"}, []string{"SCAN jobs"}},
		{"sweep", qSweepExpired, []any{now, 100},
			[]string{"USING INDEX jobs_lease (lease_until<?)"}, []string{"TEMP B-TREE", "SCAN jobs"}},
		// finished_jobs is read through the index that holds only the
		// completed holders: a step that finds it empty, before any
		// probe of it.
		{"unique lookup", qUniqueLookup, []any{`["k","l"]`, false},
			[]string{"jobs_unique_key (unique_key=?)", "SCAN finished_jobs USING INDEX finished_jobs_unique_held",
				"SEARCH d USING INDEX finished_jobs_unique_held (unique_key=?)"}, []string{"SCAN finished_jobs\n"}},
		{"replay", qReplay, []any{1, now},
			[]string{"jobs_unique_key (unique_key=?)", "finished_jobs_unique_held (unique_key=?)"}, []string{"SCAN finished_jobs", "SCAN jobs"}},
		{"completed kept", qFinishKeep, []any{1, "completed", now, 1, nil, 16},
			[]string{"USING INTEGER PRIMARY KEY (rowid=?)", "finished_jobs_unique_held (unique_key=?)"}, []string{"SCAN finished_jobs", "SCAN jobs"}},
		// The counts every dashboard view and scrape asks for read index
		// entries, never the jobs' rows.
		{"stats pending", qStatsPending, []any{now},
			[]string{"SCAN jobs USING COVERING INDEX jobs_claim"}, []string{"TEMP B-TREE"}},
		{"stats reserved", qStatsReserved, nil,
			[]string{"SCAN jobs USING INDEX jobs_lease"}, nil},
		{"fenced done", qCompleteDone, []any{1, 1},
			[]string{"USING INTEGER PRIMARY KEY (rowid=?)"}, nil},
	}
	type planCase = struct {
		name, query string
		args        []any
		want        []string
		not         []string
	}
	w, args := failedWhere(backend.FailedFilter{Queue: "q"}, time.Time{}, 10)
	cases = append(cases, planCase{"failed list by queue", failedListSQL(w), append(args, 100),
		[]string{"failed_jobs_queue (queue=? AND id<?)"}, []string{"TEMP B-TREE"}})
	// A replay or purge by filter pages by ID: each chunk continues the
	// walk where the last one stopped, never sorts and never rescans.
	w, args = failedWhere(backend.FailedFilter{Queue: "q"}, time.Now(), 0)
	cases = append(cases, planCase{"failed chunk by queue and age", failedChunkSQL(w), append(args, 0, 100, 1000),
		[]string{"failed_jobs_queue (queue=? AND id>? AND id<?)"}, []string{"TEMP B-TREE"}})
	w, args = failedWhere(backend.FailedFilter{}, time.Now(), 0)
	cases = append(cases, planCase{"failed chunk by age", failedChunkSQL(w), append(args, 0, 100, 1000),
		[]string{"USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"}, []string{"TEMP B-TREE"}})
	for _, c := range cases {
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
