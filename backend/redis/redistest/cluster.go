package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/internal/localserver"
)

// Cluster is a private Redis Cluster of masters without replicas, each a
// Server in its own temporary directory on its own ports. Its nodes are
// stopped and their directories removed when the test that started it
// ends.
type Cluster struct {
	// URL reaches the cluster in the form the backend and Client read:
	// redis://host:port?cluster=true&addr=host:port&…, every node named.
	URL   string
	Nodes []*Server
}

// StartCluster starts masters cluster-enabled redis-servers (at least 3,
// Redis's minimum), joins them with redis-cli --cluster create, the hash
// slots shared out evenly, and waits until every node says cluster_state:ok
// and knows every other. Without redis-server or redis-cli the test is
// skipped (failed under CI=true).
func StartCluster(tb testing.TB, masters int) *Cluster {
	tb.Helper()
	if masters < 3 {
		tb.Fatalf("redistest: a cluster needs at least 3 masters, not %d", masters)
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		Unavailable(tb, "no redis-cli to create a cluster: %v", err)
	}
	c := &Cluster{}
	var addrs []string
	for range masters {
		bus, err := localserver.FreePort()
		if err != nil {
			tb.Fatalf("redistest: free port: %v", err)
		}
		// The cluster bus gets a port of its own rather than the default
		// port+10000, which may be taken or beyond 65535.
		s := StartServer(tb, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", strconv.Itoa(bus), "--cluster-node-timeout", "5000")
		c.Nodes = append(c.Nodes, s)
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", s.Port))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		tb.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.URL = "redis://" + addrs[0] + "?cluster=true&addr=" + strings.Join(addrs[1:], "&addr=")
	for _, s := range c.Nodes {
		c.waitReady(ctx, tb, s, masters)
	}
	return c
}

// waitReady waits until node s reports the cluster ok with every slot
// assigned and every master known: gossip spreads the configuration that
// redis-cli set, and a client that asks a node too early gets a partial
// slot map.
func (c *Cluster) waitReady(ctx context.Context, tb testing.TB, s *Server, masters int) {
	tb.Helper()
	want := []string{"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_known_nodes:" + strconv.Itoa(masters)}
	var info string
	for {
		info = clusterInfo(ctx, s.URL)
		ready := true
		for _, w := range want {
			if !strings.Contains(info, w+"\r\n") {
				ready = false
			}
		}
		if ready {
			return
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("redistest: cluster node on port %d not ready; CLUSTER INFO:\n%s", s.Port, info)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// clusterInfo returns a node's CLUSTER INFO, or the error as text.
func clusterInfo(ctx context.Context, u string) string {
	c, err := Client(u)
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	info, err := c.Do(ctx, c.B().ClusterInfo().Build()).ToString()
	if err != nil {
		return err.Error()
	}
	return info
}
