package sqlite

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// TestRetentionQueryPlans pins the statements of cancel and retention to
// their indexes: the workers' cancel poll runs every 250 ms in every
// worker process, so a table scan there would cost a busy queue dearly.
func TestRetentionQueryPlans(t *testing.T) {
	t.Parallel()
	b, err := Open(t.Context(), filepath.Join(t.TempDir(), "plan.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Now().UnixMicro()
	where, args := listWhere([]string{"state = ?"}, []any{"completed"}, backend.JobFilter{}, "finished_at", 0)
	for _, c := range []struct {
		name, query string
		args        []any
		want        string
	}{
		{"cancel poll", qCancelling, nil, "USING INDEX jobs_cancelling"},
		{"prune", qFinishedPrune, []any{"completed", now, 1000}, "INDEX finished_jobs_finished_at (state=? AND finished_at<?)"},
		{"prune types", qFinishedPruneTypes, []any{"completed", now, 1000, `["a"]`, int64(0)}, "INDEX finished_jobs_finished_at (state=? AND finished_at>? AND finished_at<?)"},
		{"prune by IDs", qFinishedPruneIDs, []any{`[1, 2]`, "completed", now}, "USING INTEGER PRIMARY KEY (rowid=?)"},
		{"prune except", qFinishedPruneExcept, []any{"completed", now, 1000, `["a"]`, int64(0)}, "INDEX finished_jobs_finished_at (state=? AND finished_at>? AND finished_at<?)"},
		{"failed by job", qFailedByJob, []any{int64(1)}, "INDEX failed_jobs_job_id (job_id=?)"},
		{"finished list", finishedListSQL(where, false), append(args, 100), "INDEX finished_jobs_state (state=?)"},
	} {
		plan := queryPlan(t, b, c.query, c.args...)
		// A temporary B-tree would sort every candidate of a prune by
		// type: the index gives their order.
		if !strings.Contains(plan, c.want) || strings.Contains(plan, "SCAN finished_jobs\n") || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s: plan\n%s\nwant %q", c.name, plan, c.want)
		}
	}
}
