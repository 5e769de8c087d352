package netguard

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustNew(t *testing.T, entries ...string) *Policy {
	t.Helper()
	p, err := New("--allow", entries...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func check(p *Policy, host, addr string) error {
	return p.Check(host, netip.MustParseAddrPort(addr))
}

// TestDefaultPolicy: each internal range is refused, with its reason, in
// every spelling the dialer may see; public addresses pass.
func TestDefaultPolicy(t *testing.T) {
	t.Parallel()
	p := mustNew(t)
	refused := map[string]string{
		"127.0.0.1:80":                "loopback",
		"127.255.255.254:80":          "loopback",
		"[::1]:80":                    "loopback",
		"[::ffff:127.0.0.1]:80":       "loopback",
		"10.0.0.1:80":                 "private",
		"172.16.0.1:80":               "private",
		"172.31.255.255:80":           "private",
		"192.168.1.1:80":              "private",
		"[::ffff:192.168.1.1]:80":     "private",
		"[fc00::1]:80":                "private",
		"[fd12:3456::1]:80":           "private",
		"169.254.169.254:80":          "cloud metadata",
		"[::ffff:169.254.169.254]:80": "cloud metadata",
		"[fd00:ec2::254]:80":          "cloud metadata",
		"100.100.100.200:80":          "cloud metadata",
		"169.254.1.1:80":              "link-local",
		"[fe80::1]:80":                "link-local",
		"[fe80::1%eth0]:80":           "link-local", // a zoned address matches no netip.Prefix unless the zone is dropped
		"0.0.0.0:80":                  "unspecified",
		"[::]:80":                     "unspecified",
		"[::ffff:0.0.0.0]:80":         "unspecified",
		"100.64.0.1:80":               "carrier-grade NAT",
		"224.0.0.1:80":                "multicast",
		"[ff02::1]:80":                "multicast",
		"255.255.255.255:80":          "reserved or broadcast",
		"[::127.0.0.1]:80":            "IPv4-compatible",
		"[64:ff9b::7f00:1]:80":        "NAT64 form of a loopback",
		"[64:ff9b::a9fe:a9fe]:80":     "NAT64 form of a cloud metadata",
		"[64:ff9b:1::a00:1]:80":       "NAT64 form of a private",
		"[2002:a00:1::1]:80":          "6to4 form of a private",
		"192.0.0.1:80":                "IETF protocol assignment",
		"192.0.0.170:80":              "IETF protocol assignment", // NAT64 prefix discovery (RFC 7050)
		"198.18.0.1:80":               "benchmarking",
		"198.19.255.255:80":           "benchmarking",
		"240.0.0.1:80":                "reserved or broadcast",
		"[64:ff9b::f000:1]:80":        "NAT64 form of a reserved or broadcast",
		"[64:ff9b::ffff:ffff]:80":     "NAT64 form of a reserved or broadcast",
		"[2002:f000:1::1]:80":         "6to4 form of a reserved or broadcast",
		"[2002:ffff:ffff::1]:80":      "6to4 form of a reserved or broadcast",
		"[64:ff9b::c612:1]:80":        "NAT64 form of a benchmarking",
		"[2002:c000:1::1]:80":         "6to4 form of an IETF protocol assignment",
		// Teredo (RFC 4380): server 65.54.227.120 (4136:e378), flags, port,
		// then the client's IPv4 with every bit flipped.
		"[2001:0:4136:e378:8000:63bf:80ff:fffe]:80": "Teredo form of a loopback",              // client ^127.0.0.1
		"[2001:0:4136:e378:8000:63bf:f5ff:fffe]:80": "Teredo form of a private",               // client ^10.0.0.1
		"[2001:0:4136:e378:8000:63bf:5601:5601]:80": "Teredo form of a cloud metadata",        // client ^169.254.169.254
		"[2001:0:4136:e378:8000:63bf:fff:fffe]:80":  "Teredo form of a reserved or broadcast", // client ^240.0.0.1
		"[2001:0:4136:e378:8000:63bf:0:0]:80":       "Teredo form of a reserved or broadcast", // client ^255.255.255.255
		"[2001:0:a00:1:8000:63bf:f7f7:f7f7]:80":     "Teredo form of a private",               // server 10.0.0.1, client 8.8.8.8
		"[2001:0:7f00:1:8000:63bf:f7f7:f7f7]:80":    "Teredo form of a loopback",              // server 127.0.0.1
	}
	for addr, reason := range refused {
		err := check(p, addr, addr)
		var re *RefusedError
		if !errors.As(err, &re) || re.Reason != reason {
			t.Errorf("%s: %v, want refused as %s", addr, err, reason)
		}
	}
	for _, addr := range []string{
		"8.8.8.8:443", "172.32.0.1:80", "100.128.0.1:80", "169.255.0.1:80", "203.0.113.7:80",
		"[2606:4700:4700::1111]:443", "[::ffff:8.8.8.8]:80", "[64:ff9b::808:808]:80", "[2002:808:808::1]:80",
		"198.20.0.1:80", "198.17.255.255:80", "192.0.1.1:80", "191.255.255.255:80",
		"[2001:0:4136:e378:8000:63bf:f7f7:f7f7]:80", // Teredo: server 65.54.227.120, client 8.8.8.8
		"[2001:1::1]:80", // next to Teredo's /32, not in it
	} {
		if err := check(p, addr, addr); err != nil {
			t.Errorf("%s: %v, want allowed", addr, err)
		}
	}
}

// TestAllowList: each kind of entry opens what it names and nothing more;
// cloud metadata needs an entry naming that exact address.
func TestAllowList(t *testing.T) {
	t.Parallel()
	p := mustNew(t, "10.0.0.0/8", "192.168.1.5", "internal.example:8443", "127.0.0.1:9000", "[::1]:9001",
		"169.254.0.0/16", "::ffff:172.16.0.0/108", "127.0.0.2:09003")
	cases := []struct {
		host, addr string
		ok         bool
	}{
		{"10.1.2.3:80", "10.1.2.3:80", true},
		{"x:80", "[::ffff:10.1.2.3]:80", true}, // mapped forms match IPv4 entries
		{"11.0.0.1:80", "11.0.0.1:80", true},   // public anyway
		{"192.168.1.5:1", "192.168.1.5:1", true},
		{"192.168.1.6:1", "192.168.1.6:1", false},
		{"172.16.3.4:80", "172.16.3.4:80", true}, // entry given in mapped form
		{"internal.example:8443", "192.168.7.7:8443", true},
		{"INTERNAL.example.:8443", "[fd00::7]:8443", true}, // case and the root dot do not matter
		{"internal.example:8444", "192.168.7.7:8444", false},
		{"other.example:8443", "192.168.7.7:8443", false},
		{"127.0.0.1:9000", "127.0.0.1:9000", true},
		{"localhost:9000", "127.0.0.1:9000", true}, // an ip:port entry matches what is dialled
		{"127.0.0.1:9002", "127.0.0.1:9002", false},
		{"[::1]:9001", "[::1]:9001", true},
		{"127.0.0.2:9003", "127.0.0.2:9003", true}, // the entry's port written with a leading zero
		{"169.254.3.3:80", "169.254.3.3:80", true},
		{"169.254.169.254:80", "169.254.169.254:80", false}, // a broad CIDR does not open metadata
	}
	for _, c := range cases {
		if err := check(p, c.host, c.addr); (err == nil) != c.ok {
			t.Errorf("%s via %s: %v, want allowed=%v", c.host, c.addr, err, c.ok)
		}
	}

	for _, entries := range [][]string{{"0.0.0.0/0"}, {"internal.example:80"}, {"::/0"}, {"64:ff9b::/96"}} {
		p := mustNew(t, entries...)
		for _, addr := range []string{"169.254.169.254:80", "[64:ff9b::a9fe:a9fe]:80", "[2001:0:4136:e378:8000:63bf:5601:5601]:80"} {
			if err := check(p, "internal.example:80", addr); err == nil {
				t.Errorf("%v opened the metadata address %s", entries, addr)
			}
		}
	}
	for _, entry := range []string{"169.254.169.254", "169.254.169.254/32", "169.254.169.254:80", "::ffff:169.254.169.254"} {
		if err := check(mustNew(t, entry), "169.254.169.254:80", "169.254.169.254:80"); err != nil {
			t.Errorf("%s did not open the metadata address: %v", entry, err)
		}
	}
	if got, want := strings.Join(mustNew(t, "10.0.0.0/8", "b.example:1", "::1", "a.example:2").Entries(), ","),
		"10.0.0.0/8,::1/128,a.example:2,b.example:1"; got != want {
		t.Errorf("Entries() = %s, want %s", got, want)
	}
}

func TestNewRefusesBadEntries(t *testing.T) {
	t.Parallel()
	for entry, want := range map[string]string{
		"":                     "empty entry",
		"10.0.0.0/33":          "not a CIDR",
		"10.0.0.1/8":           "did you mean 10.0.0.0/8?",
		"internal.example":     "has no port",
		"internal.example:0":   "not a number from 1 to 65535",
		"internal.example:x":   "not a number from 1 to 65535",
		"internal.example:1:2": "use a CIDR",
		"bad host!:80":         "is not a host name or address",
		"fe80::1%eth0":         "leave out the zone",
		"http://x.example:80":  "not a CIDR", // has a slash
	} {
		_, err := New("--allow", entry)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("New(%q): %v, want one line containing %q", entry, err, want)
		}
	}
}

func TestRefusedErrorText(t *testing.T) {
	t.Parallel()
	p := mustNew(t)
	for _, c := range []struct{ host, addr, want string }{
		{"127.0.0.1:8080", "127.0.0.1:8080", "refused to connect to 127.0.0.1:8080: 127.0.0.1 is a loopback address, refused unless allowed; to allow it, add 127.0.0.1:8080 (or a CIDR holding 127.0.0.1) to --allow"},
		{"localhost:8080", "[::1]:8080", "refused to connect to [::1]:8080 (localhost:8080 resolved to it): ::1 is a loopback address, refused unless allowed; to allow it, add localhost:8080 (or a CIDR holding ::1) to --allow"},
		{"[::ffff:10.0.0.1]:80", "[::ffff:10.0.0.1]:80", "refused to connect to 10.0.0.1:80: 10.0.0.1 is a private address, refused unless allowed; to allow it, add 10.0.0.1:80 (or a CIDR holding 10.0.0.1) to --allow"},
		{"[::]:80", "[::]:80", "refused to connect to [::]:80: :: is an unspecified address, refused unless allowed; to allow it, add [::]:80 (or a CIDR holding ::) to --allow"},
		{"169.254.169.254:80", "169.254.169.254:80", "refused to connect to 169.254.169.254:80: 169.254.169.254 is a cloud metadata address, refused unless allowed; to allow it (it may hand out the machine's credentials), add exactly 169.254.169.254 to --allow"},
	} {
		if err := check(p, c.host, c.addr); err == nil || err.Error() != c.want {
			t.Errorf("%s via %s:\n got %v\nwant %s", c.host, c.addr, err, c.want)
		}
	}
}

// server is an httptest server that counts the requests it was sent.
func server(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func client(t *testing.T, p *Policy, d *net.Dialer) *http.Client {
	tr := p.Transport(d)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func get(c *http.Client, u string) error {
	resp, err := c.Get(u)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// wantRefused checks err is the guard's refusal of ip.
func wantRefused(t *testing.T, what string, err error, ip string) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) || re.Addr.Addr().Unmap().String() != ip {
		t.Errorf("%s: %v, want a refusal of %s", what, err, ip)
	}
}

// TestTransportChecksDialledAddress sends real requests: the default
// policy refuses a loopback server by address and by a name that resolves
// to loopback, before any byte is sent; an allow-list entry lets it
// through.
func TestTransportChecksDialledAddress(t *testing.T) {
	t.Parallel()
	if mustNew(t).Transport(nil).Proxy != nil {
		t.Fatal("the transport uses a proxy: the guard would check the proxy, not the target")
	}
	srv, hits := server(t, nil)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]

	deny := client(t, mustNew(t), nil)
	wantRefused(t, "by address", get(deny, srv.URL+"/x?token=s3cret"), "127.0.0.1")
	err := get(deny, "http://localhost:"+port+"/")
	var re *RefusedError
	if !errors.As(err, &re) || re.Host != "localhost:"+port || re.Reason != "loopback" {
		t.Errorf("localhost: %v, want a loopback refusal naming localhost:%s", err, port)
	}
	if hits.Load() != 0 {
		t.Fatalf("the server got %d requests through a refusing policy", hits.Load())
	}

	for _, entry := range []string{"127.0.0.1", "127.0.0.0/8", "127.0.0.1:" + port, "localhost:" + port} {
		c := client(t, mustNew(t, entry), nil)
		u := srv.URL
		if strings.HasPrefix(entry, "localhost") {
			u = "http://localhost:" + port
		}
		if err := get(c, u); err != nil {
			t.Errorf("allowed by %s: %v", entry, err)
		}
	}
	if hits.Load() != 4 {
		t.Errorf("the server got %d requests, want 4", hits.Load())
	}
}

// TestRedirectIsChecked: an allowed server that redirects to a refused
// address does not get the client there.
func TestRedirectIsChecked(t *testing.T) {
	t.Parallel()
	inner, innerHits := server(t, nil)
	outer, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL+"/admin", http.StatusFound)
	})
	u, _ := url.Parse(outer.URL)
	c := client(t, mustNew(t, u.Host), nil) // opens the outer server's port only
	err := get(c, outer.URL)
	wantRefused(t, "redirect", err, "127.0.0.1")
	if innerHits.Load() != 0 {
		t.Errorf("the redirect target got %d requests", innerHits.Load())
	}
	var re *RefusedError
	if errors.As(err, &re) && re.Host != strings.TrimPrefix(inner.URL, "http://") {
		t.Errorf("refusal names host %s, want the redirect's %s", re.Host, inner.URL)
	}
}

// TestDNSRebinding resolves a name through a DNS server that answers a
// public address first and 127.0.0.1 afterwards, as a rebinding attack
// does: a check of the name before dialling would see the public address
// and pass; the guard checks what is dialled and refuses.
func TestDNSRebinding(t *testing.T) {
	t.Parallel()
	srv, hits := server(t, nil)
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	var queries atomic.Int32
	res := fakeDNS(t, func() netip.Addr {
		if queries.Add(1) == 1 {
			return netip.MustParseAddr("203.0.113.7")
		}
		return netip.MustParseAddr("127.0.0.1")
	})

	first, err := res.LookupNetIP(t.Context(), "ip4", "rebind.test.")
	if err != nil || len(first) != 1 || first[0].String() != "203.0.113.7" {
		t.Fatalf("first lookup: %v %v, want the public address", first, err)
	}
	if err := mustNew(t).Check("rebind.test:"+port, netip.AddrPortFrom(first[0], 80)); err != nil {
		t.Fatalf("a check at lookup time passes: %v", err)
	}
	c := client(t, mustNew(t), &net.Dialer{Resolver: res})
	wantRefused(t, "rebound name", get(c, "http://rebind.test.:"+port+"/"), "127.0.0.1")
	if hits.Load() != 0 {
		t.Fatal("the rebound name reached the loopback server")
	}

	// The same name with loopback allowed reaches the server: the refusal
	// above was the guard's, not a failure to resolve or connect.
	c = client(t, mustNew(t, "127.0.0.1/32"), &net.Dialer{Resolver: res})
	if err := get(c, "http://rebind.test.:"+port+"/"); err != nil || hits.Load() != 1 {
		t.Fatalf("allowed: %v, %d requests", err, hits.Load())
	}
}

// fakeDNS serves A queries with next() (and AAAA with no answer) over UDP
// on loopback, and returns a resolver that asks only it.
func fakeDNS(t *testing.T, next func() netip.Addr) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { pc.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := dnsAnswer(buf[:n], next); resp != nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp4", pc.LocalAddr().String())
	}}
}

// dnsAnswer builds the reply to a one-question query (RFC 1035 4.1).
func dnsAnswer(q []byte, next func() netip.Addr) []byte {
	end := 12
	for end < len(q) && q[end] != 0 {
		end += int(q[end]) + 1
	}
	end += 5 // the root label, QTYPE, QCLASS
	if len(q) < end || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[end-4 : end-2])
	resp := append([]byte{q[0], q[1], 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0}, q[12:end]...)
	if qtype == 1 { // A
		resp[7] = 1
		ip := next().As4()
		resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4)
		resp = append(resp, ip[:]...)
	}
	return resp
}
