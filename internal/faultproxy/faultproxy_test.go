package faultproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// echoServer answers every line with the same line until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// start runs a proxy to target until the test ends.
func start(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Listen("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return p
}

// client is a line-oriented connection through the proxy.
type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *Proxy) *client {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

// roundTrip sends line and reads the echo, within timeout.
func (c *client) roundTrip(line string, timeout time.Duration) (string, error) {
	_ = c.c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c.c, line+"\n"); err != nil {
		return "", err
	}
	got, err := c.r.ReadString('\n')
	if len(got) > 0 {
		got = got[:len(got)-1]
	}
	return got, err
}

// read reads one line within timeout.
func (c *client) read(timeout time.Duration) (string, error) {
	_ = c.c.SetDeadline(time.Now().Add(timeout))
	got, err := c.r.ReadString('\n')
	if len(got) > 0 {
		got = got[:len(got)-1]
	}
	return got, err
}

func TestForwards(t *testing.T) {
	p := start(t, echoServer(t))
	c := dial(t, p)
	for _, line := range []string{"one", "two"} {
		got, err := c.roundTrip(line, 5*time.Second)
		if err != nil || got != line {
			t.Fatalf("round trip %q: got %q, %v", line, got, err)
		}
	}
	if n := p.Conns(); n != 1 {
		t.Errorf("Conns = %d, want 1", n)
	}
}

func TestCut(t *testing.T) {
	p := start(t, echoServer(t))
	c := dial(t, p)
	if _, err := c.roundTrip("hello", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := p.Cut(); n != 1 {
		t.Errorf("Cut closed %d connections, want 1", n)
	}
	if _, err := c.roundTrip("after", 5*time.Second); err == nil {
		t.Fatal("a cut connection still answered")
	} else if isTimeout(err) {
		t.Fatalf("a cut connection hung instead of failing: %v", err)
	}
	// A new connection works at once.
	if got, err := dial(t, p).roundTrip("again", 5*time.Second); err != nil || got != "again" {
		t.Fatalf("new connection after cut: %q, %v", got, err)
	}
}

func TestBlackholeThenDeliverLate(t *testing.T) {
	p := start(t, echoServer(t))
	c := dial(t, p)
	if _, err := c.roundTrip("before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	if _, err := c.roundTrip("held", 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("blackholed round trip: want a timeout, got %v", err)
	}
	// A new connection is accepted but not answered either.
	late := dial(t, p)
	if _, err := late.roundTrip("new", 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("new connection while blackholed: want a timeout, got %v", err)
	}
	if n := p.Conns(); n != 2 {
		t.Errorf("Conns while blackholed = %d, want 2 (kept open)", n)
	}
	p.Heal(false)
	// What was held arrives late, in order.
	if got, err := c.read(5 * time.Second); err != nil || got != "held" {
		t.Fatalf("after heal: got %q, %v; want the held line", got, err)
	}
	if got, err := late.read(5 * time.Second); err != nil || got != "new" {
		t.Fatalf("new connection after heal: got %q, %v", got, err)
	}
}

func TestBlackholeThenCut(t *testing.T) {
	p := start(t, echoServer(t))
	c := dial(t, p)
	if _, err := c.roundTrip("before", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	if _, err := c.roundTrip("held", 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("blackholed round trip: want a timeout, got %v", err)
	}
	p.Heal(true)
	if got, err := c.read(5 * time.Second); err == nil {
		t.Fatalf("a connection cut at heal delivered %q", got)
	} else if isTimeout(err) {
		t.Fatalf("a connection cut at heal hung: %v", err)
	}
}

func TestLatency(t *testing.T) {
	p := start(t, echoServer(t))
	c := dial(t, p)
	start := time.Now()
	if _, err := c.roundTrip("fast", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	fast := time.Since(start)
	// A latency long enough that the round trip once it is removed can be
	// given a generous bound: with 100ms, a loaded machine's plain round
	// trip (-race, a CPU hog) could take longer than the latency. A round
	// trip still delayed takes 2×lat, so that is the bound after removal.
	const lat = time.Second
	p.SetLatency(lat)
	start = time.Now()
	if got, err := c.roundTrip("slow", time.Minute); err != nil || got != "slow" {
		t.Fatalf("round trip with latency: %q, %v", got, err)
	}
	// Both directions are delayed.
	if took := time.Since(start); took < 2*lat {
		t.Errorf("round trip with %s latency took %s (without: %s), want at least %s", lat, took, fast, 2*lat)
	}
	p.SetLatency(0)
	start = time.Now()
	if _, err := c.roundTrip("fast again", time.Minute); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took >= 2*lat {
		t.Errorf("round trip after latency was removed took %s, as long as one delayed both ways", took)
	}
}

func TestRunEndsWithBlackholedConnections(t *testing.T) {
	target := echoServer(t)
	p, err := Listen("127.0.0.1:0", target)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	c := dial(t, p)
	if _, err := c.roundTrip("x", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole()
	_, _ = c.roundTrip("held", 100*time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return with a blackholed connection open")
	}
}

func TestUnreachableTarget(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close() // nothing listens there now
	p := start(t, target)
	if _, err := dial(t, p).roundTrip("x", 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("round trip to a closed target: want a connection error, got %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
