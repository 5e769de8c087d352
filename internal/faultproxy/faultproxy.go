// Package faultproxy is a TCP proxy that injects network faults between
// jobq's workers and their broker (PostgreSQL, Redis) on command: it cuts
// every connection, blackholes them (stops forwarding while keeping them
// open, as a partition that drops packets does, then delivers what it
// held late or cuts), and adds latency. It needs no privileges: clients
// are pointed at its listener instead of the broker.
//
// jobq verify uses it for its proxy fault; its tests use it directly.
package faultproxy

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds a connection to the target.
const dialTimeout = 5 * time.Second

// Proxy forwards the connections its listener accepts to a target address.
// Create it with Listen and run it with Run; every method is safe for
// concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	links   map[*link]struct{}
	hole    chan struct{} // non-nil while blackholed; closed by Heal
	latency time.Duration
	done    bool // Run has returned: new links are refused

	wg sync.WaitGroup // every link's goroutines
}

// Listen opens the proxy's listener on addr ("127.0.0.1:0" for a free
// port) for connections to target (host:port). Nothing is accepted until
// Run.
func Listen(addr, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen on %s: %w", addr, err)
	}
	return &Proxy{ln: ln, target: target, links: map[*link]struct{}{}}, nil
}

// Addr is the listener's address (host:port), what clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address connections are forwarded to.
func (p *Proxy) Target() string { return p.target }

// Run accepts and forwards connections until ctx ends, then closes the
// listener and every connection and returns once all of its goroutines
// have. It returns nil after ctx ended, or the listener's error.
func (p *Proxy) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = p.ln.Close() })
	defer stop()
	var err error
	for {
		var c net.Conn
		c, err = p.ln.Accept()
		if err != nil {
			break
		}
		p.wg.Add(1)
		go p.serve(ctx, c)
	}
	_ = p.ln.Close()
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
	p.Heal(true)
	p.wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("faultproxy: accept: %w", err)
}

// Cut closes every open connection, as a broken network or a restarted
// middlebox does; clients see their connections reset and reconnect. It
// returns how many it closed.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	return len(links)
}

// Blackhole stops forwarding in both directions until Heal: connections
// stay open, bytes sent are held (in the proxy and the kernel's buffers),
// and new connections are accepted but not forwarded, so clients see
// their calls hang rather than fail.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hole == nil {
		p.hole = make(chan struct{})
	}
}

// Heal ends a blackhole. With cut, every connection is closed first (a
// partition that outlived the connections); without, forwarding resumes
// and what was held is delivered late, as a network that heals does.
func (p *Proxy) Heal(cut bool) {
	if cut {
		p.Cut()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hole != nil {
		close(p.hole)
		p.hole = nil
	}
}

// SetLatency delays every chunk of data forwarded from now on by d, in
// each direction (0 for none).
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = max(0, d)
}

// Conns is the number of connections open now.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// gate returns the channel a forwarder waits on while the proxy is
// blackholed, nil when it is not, and the latency to add.
func (p *Proxy) gate() (<-chan struct{}, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hole == nil {
		return nil, p.latency
	}
	return p.hole, p.latency
}

// serve dials the target for the accepted connection c and forwards
// between them until either side closes or the link is cut.
func (p *Proxy) serve(ctx context.Context, c net.Conn) {
	defer p.wg.Done()
	l := &link{client: c, closed: make(chan struct{})}
	if !p.add(l) {
		_ = c.Close()
		return
	}
	defer p.remove(l)
	// A blackhole holds new connections too: the client's connect
	// succeeds (the kernel accepted it) but nothing answers.
	if !l.wait(p) {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	up, err := (&net.Dialer{}).DialContext(dctx, "tcp", p.target)
	cancel()
	if err != nil {
		l.close()
		return
	}
	if !l.setUpstream(up) {
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.pump(p, up, c) }()
	go func() { defer wg.Done(); l.pump(p, c, up) }()
	wg.Wait()
}

func (p *Proxy) add(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return false
	}
	p.links[l] = struct{}{}
	return true
}

func (p *Proxy) remove(l *link) {
	l.close()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// link is one proxied connection: the client's and the upstream one.
type link struct {
	client net.Conn
	mu     sync.Mutex
	up     net.Conn // nil until dialled
	once   sync.Once
	closed chan struct{}
}

// setUpstream records the dialled connection; false (closing it) when
// the link was cut meanwhile.
func (l *link) setUpstream(up net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.closed:
		_ = up.Close()
		return false
	default:
	}
	l.up = up
	return true
}

// close closes both connections once.
func (l *link) close() {
	l.once.Do(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		close(l.closed)
		_ = l.client.Close()
		if l.up != nil {
			_ = l.up.Close()
		}
	})
}

// wait blocks while the proxy is blackholed; false when the link was cut
// meanwhile.
func (l *link) wait(p *Proxy) bool {
	for {
		hole, _ := p.gate()
		if hole == nil {
			return true
		}
		select {
		case <-hole:
		case <-l.closed:
			return false
		}
	}
}

// pump copies from src to dst, holding each chunk while the proxy is
// blackholed and delaying it by the latency, until either side fails;
// then it closes the link, so the other direction ends too.
func (l *link) pump(p *Proxy, dst, src net.Conn) {
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !l.wait(p) {
				return
			}
			if _, lat := p.gate(); lat > 0 {
				t := time.NewTimer(lat)
				select {
				case <-t.C:
				case <-l.closed:
					t.Stop()
					return
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			// EOF, a reset or a cut: the other side learns by the close.
			return
		}
	}
}
