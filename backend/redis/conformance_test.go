package redis

import (
	"testing"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/backendtest"
)

// TestConformance runs the suite with each test on its own key prefix.
// Every script call checks that its keys share one Cluster slot (see
// client.checkSlots), so the suite also proves the key layout fit for a
// cluster; with JOBQ_TEST_REDIS_URL naming a cluster it runs there. After
// each test the failed jobs' index by job ID must match the failed
// records (checkFailedIndex).
func TestConformance(t *testing.T) {
	testURL(t)
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend {
			b := openTest(t, Options{})
			// Once the test is over (the suite has closed b, the prefix
			// is still there): every script that made or deleted a
			// failed record kept its index.
			t.Cleanup(func() { checkFailedIndexOf(t, b.KeyPrefix()) })
			return b
		},
	})
}
