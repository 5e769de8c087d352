package storetest

import (
	"testing"

	"github.com/jobq/jobq/backend"
)

// ResultSecret is the token in KeptResult, which no answer or output may
// show: a result is masked as a payload is.
const ResultSecret = "tok-9911"

// KeptResult is a result holding a masked key (token: ResultSecret) and
// markup that a page must show as text.
const KeptResult = `{"url":"s3://b/a-320.png","width":320,"token":"` + ResultSecret + `","note":"<script>window.__xss=31</script>"}`

// KeptWithResult inserts a job into queue of b, claims it and completes
// it kept (as a worker with Retention.Completed does) with result (nil:
// none), for the tests of what shows a finished job's result. It returns
// the job's ID.
func KeptWithResult(t testing.TB, b backend.Backend, queue string, result []byte) int64 {
	t.Helper()
	res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{{Queue: queue, Type: "thumb", Payload: []byte(`{"image":"a.png"}`), MaxAttempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	EndTask(t, b, queue, backend.Outcome{Kind: backend.OutcomeDone, Keep: true, Result: result})
	return res[0].ID
}
