package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// rebindHost is the attacker's name. Chromium resolves it to 127.0.0.1
// (--host-resolver-rules); the rebinder behind 127.0.0.1:P then decides
// whether that address is "the attacker's server" or "the victim's jobq",
// as a DNS answer with a short TTL would.
const rebindHost = "rebind.evil.example"

// rebindPage is the attacker's page. attack() runs once the name points at
// jobq: its fetches are same-origin to the browser, so neither CORS nor
// the cross-origin check stops them; only the Host header gives them away.
const rebindPage = `<!doctype html><title>cute cats</title>
<script>
async function probe(path, init) {
  const r = await fetch(path, Object.assign({cache: "no-store"}, init));
  return {status: r.status, body: await r.text()};
}
async function attack() {
  return JSON.stringify({
    queues: await probe("/api/v1/queues"),
    enqueue: await probe("/api/v1/jobs", {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({type: "http", payload: {url: "http://example.invalid/"}})}),
    dashboard: await probe("/"),
  });
}
</script>
<form method="post" action="/failed/purge"><input name="all" value="1"><button id="purge">win a cat</button></form>`

// rebinder is a TCP proxy on 127.0.0.1 standing for the rebound DNS name:
// each new connection goes to the address the name currently resolves to.
type rebinder struct {
	l     net.Listener
	mu    sync.Mutex
	to    string // "" once closed
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newRebinder(t *testing.T, to string) *rebinder {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &rebinder{l: l, to: to, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { l.Close(); p.rebind(""); p.wg.Wait() })
	return p
}

func (p *rebinder) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		// Dialled under the lock: no connection slips through to the old
		// address after rebind returns.
		p.mu.Lock()
		var up net.Conn
		if p.to != "" {
			up, err = net.Dial("tcp", p.to)
		}
		if up == nil || err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.wg.Add(1)
		p.mu.Unlock()
		go p.pipe(c, up)
	}
}

func (p *rebinder) pipe(c, up net.Conn) {
	defer p.wg.Done()
	done := make(chan struct{})
	go func() { _, _ = io.Copy(up, c); c.Close(); up.Close(); close(done) }()
	_, _ = io.Copy(c, up)
	c.Close()
	up.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// rebind points the name at to and drops every open connection, so the
// browser's next request needs a new one (as after its DNS cache expired).
func (p *rebinder) rebind(to string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.to = to
	for c := range p.conns {
		c.Close()
	}
}

// TestBrowserRebind: without tokens the handler trusts every request and
// relies on loopback. A DNS-rebinding page reaches loopback anyway, with
// the attacker's name in Host; the handler must refuse it.
func TestBrowserRebind(t *testing.T) {
	bctx, _ := browser(t, chromedp.Flag("host-resolver-rules", "MAP "+rebindHost+" 127.0.0.1"))
	e := newEnvOn(t, openSQLite(t), Options{}) // no tokens: everyone is admin
	e.failJobs("billing", 2)                   // for the purge form to destroy

	var attackerHost atomic.Value
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attackerHost.Store(r.Host)
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Connection", "close") // no connection outlives the rebinding
		fmt.Fprint(w, rebindPage)
	}))
	t.Cleanup(attacker.Close)
	p := newRebinder(t, attacker.Listener.Addr().String())
	port := p.l.Addr().(*net.TCPAddr).Port
	origin := fmt.Sprintf("http://%s:%d", rebindHost, port)

	ctx := tab(t, bctx)
	run(t, ctx, "open the attacker's page", chromedp.Navigate(origin+"/"))
	if title := value(t, ctx, "read the title", chromedp.Title()); title != "cute cats" {
		t.Fatalf("the browser shows %q, want the attacker's page", title)
	}
	if h, _ := attackerHost.Load().(string); h != fmt.Sprintf("%s:%d", rebindHost, port) {
		t.Fatalf("the attacker's server saw Host %q, want %s:%d", h, rebindHost, port)
	}

	p.rebind(e.srv.Listener.Addr().String())
	// Control: the proxy now reaches jobq, which answers a loopback Host,
	// so a refusal below is the Host check and not a dead proxy.
	ctl, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/api/v1/queues", port), nil)
	ctl.Close = true // no idle connection left behind for goleak
	res, err := noRedirect.Do(ctl)
	if err != nil {
		t.Fatalf("control request through the rebinder: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("control request through the rebinder: %d %s, want 200 JSON from jobq", res.StatusCode, res.Header.Get("Content-Type"))
	}

	raw := value(t, ctx, "run attack()", chromedp.Evaluate[string](`attack()`, chromedp.EvalAwaitPromise))
	var got map[string]struct {
		Status int
		Body   string
	}
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		t.Fatalf("attack() answered %s: %v", raw, err)
	}
	for _, k := range []string{"queues", "enqueue"} {
		var body struct{ Error struct{ Code string } }
		_ = json.Unmarshal([]byte(got[k].Body), &body)
		if got[k].Status != http.StatusForbidden || body.Error.Code != "host_not_allowed" {
			t.Errorf("rebound %s request: %d %.200s, want 403 host_not_allowed", k, got[k].Status, strings.TrimSpace(got[k].Body))
		}
	}
	d := got["dashboard"]
	_, h1, _ := strings.Cut(d.Body, "<h1>")
	if h1, _, _ = strings.Cut(h1, "</h1>"); d.Status != http.StatusForbidden || h1 != "Host not allowed" {
		t.Errorf("rebound dashboard request: %d <h1>%.80s</h1>, want 403 Host not allowed", d.Status, h1)
	}

	// A real form submission, as a page would send it to purge every
	// failed job: the browser lands on the refusal.
	run(t, ctx, "submit the purge form", chromedp.Click(chromedp.ID("purge")))
	waitFor(t, ctx, "the form's answer", `location.pathname.startsWith("/failed") && document.readyState === "complete"`, 15*time.Second)
	if h1 := text(t, ctx, "h1"); h1 != "Host not allowed" {
		t.Errorf("the rebound purge form lands on %q, want Host not allowed", h1)
	}

	// The real outcome: nothing enqueued, nothing purged.
	if c := e.counts(); c.Pending != 0 || c.Scheduled != 0 || c.Failed != 2 {
		t.Errorf("after the attack the store holds pending %d scheduled %d failed %d, want 0 0 2 as before", c.Pending, c.Scheduled, c.Failed)
	}
}
