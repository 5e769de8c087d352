package redis

import (
	"fmt"
	"testing"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/backendtest"
	"github.com/jobq/jobq/backend/redis/redistest"
)

// TestClusterConformance starts a Redis Cluster of three masters of its
// own and runs the conformance suite against it, each test on a fresh key
// prefix: the queues' keys spread over the nodes, scripts run on the node
// owning their queue's slot, and work spanning queues (unique keys, inserts
// over several queues, sweeps, stats, failed-job lists) goes to several
// nodes. Every script call also checks that its keys share one slot.
func TestClusterConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node Redis Cluster")
	}
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	checkSpread(t, cl)
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend {
			return openURL(t, cl.URL, Options{KeyPrefix: redistest.Prefix(t, cl.URL), Logger: quiet})
		},
	})
}

// checkSpread inserts a job into each of ten queues and asserts that their
// keys landed on more than one node: the suite then runs on a real
// cluster, not on one node that happens to own every slot.
func checkSpread(t *testing.T, cl *redistest.Cluster) {
	t.Helper()
	prefix := redistest.Prefix(t, cl.URL)
	b := openURL(t, cl.URL, Options{KeyPrefix: prefix, Logger: quiet})
	for i := range 10 {
		insertJob(t, b, fmt.Sprintf("q%d", i))
	}
	perNode := map[int]int{}
	for _, n := range cl.Nodes {
		keys, err := redistest.Keys(t.Context(), n.URL, prefix)
		if err != nil {
			t.Fatalf("keys of node on port %d: %v", n.Port, err)
		}
		if len(keys) > 0 {
			perNode[n.Port] = len(keys)
		}
	}
	if len(perNode) < 2 {
		t.Fatalf("the keys of ten queues are on %d node(s) (keys per port: %v), want several", len(perNode), perNode)
	}
}
