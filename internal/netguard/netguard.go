// Package netguard keeps outgoing connections away from addresses a
// request from outside should never reach: loopback, private networks,
// link-local and cloud metadata endpoints, and the like. It checks the
// address a dialer is about to connect to, after name resolution, so a
// name that resolves to a public address when a URL is checked and to
// 127.0.0.1 when it is dialled (DNS rebinding) is still refused, and every
// redirect an http.Client follows is checked again as it dials.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const metadata = "cloud metadata"

// blocked are the ranges refused unless allowed, with the word an error
// uses for each. The first match names the reason, so the specific cloud
// metadata addresses come before the ranges that hold them.
var blocked = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), metadata}, // AWS, GCP, Azure, OpenStack, …
	{netip.MustParsePrefix("fd00:ec2::254/128"), metadata},  // AWS over IPv6
	{netip.MustParsePrefix("100.100.100.200/32"), metadata}, // Alibaba Cloud
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},     // "this network": 0.0.0.0 reaches the host itself
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("::/96"), "IPv4-compatible"}, // deprecated form of an IPv4 address
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("fc00::/7"), "private"},                // unique local
	{netip.MustParsePrefix("fec0::/10"), "private"},               // deprecated site-local
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT"}, // shared address space
	// Special-purpose IPv4 (RFC 6890): DS-Lite's tunnel ends (192.0.0.0/29)
	// and the like belong to the operator's network, not the Internet.
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignment"},
	// RFC 2544: test networks, often left routed inside labs and data centres.
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved or broadcast"}, // 255.255.255.255 included
}

// Policy decides which addresses a dialer may connect to: everything but
// the blocked ranges, plus what its allow-list opens. The zero Policy
// refuses the blocked ranges and allows nothing extra.
type Policy struct {
	nets  []netip.Prefix
	hosts map[string]bool // "name:port" and "ip:port", lower case
	// Flag names the setting that holds the allow-list, so a refusal can
	// say how to open the address it refused (e.g. "--http-allow").
	Flag string
}

// New returns a policy that also allows the given entries, each one of:
// a CIDR ("10.0.0.0/8"), an address ("10.1.2.3", "::1"), or a host and
// port ("internal.example:8443", "127.0.0.1:8080", "[::1]:8080"). A name
// entry allows whatever the name resolves to, on that port, when a request
// names that host. flag is used in error messages (see Policy.Flag).
func New(flag string, entries ...string) (*Policy, error) {
	p := &Policy{Flag: flag, hosts: map[string]bool{}}
	for _, e := range entries {
		if err := p.add(e); err != nil {
			return nil, err
		}
	}
	return p, nil
}

const entryForms = "use a CIDR (10.0.0.0/8), an address (10.0.0.5) or host:port (internal.example:8443)"

func (p *Policy) add(e string) error {
	e = strings.TrimSpace(e)
	if e == "" {
		return errors.New("empty entry: " + entryForms)
	}
	if strings.Contains(e, "/") {
		pre, err := netip.ParsePrefix(e)
		if err != nil {
			return fmt.Errorf("%q is not a CIDR: %s", e, entryForms)
		}
		if pre.Masked() != pre {
			return fmt.Errorf("%q has bits set past the /%d: did you mean %s?", e, pre.Bits(), pre.Masked())
		}
		p.nets = append(p.nets, unmapPrefix(pre))
		return nil
	}
	if ip, err := netip.ParseAddr(e); err == nil {
		if ip.Zone() != "" {
			return fmt.Errorf("%q: leave out the zone (%%%s)", e, ip.Zone())
		}
		ip = ip.Unmap()
		p.nets = append(p.nets, netip.PrefixFrom(ip, ip.BitLen()))
		return nil
	}
	host, port, err := net.SplitHostPort(e)
	if err != nil {
		if strings.Count(e, ":") == 0 {
			return fmt.Errorf("%q has no port: %s", e, entryForms)
		}
		return fmt.Errorf("%q: %s", e, entryForms)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number from 1 to 65535", e, port)
	}
	// Written as the dialled address writes it ("08080" is 8080), or the
	// entry would never match.
	port = strconv.Itoa(n)
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return fmt.Errorf("%q: leave out the zone (%%%s)", e, ip.Zone())
		}
		p.hosts[net.JoinHostPort(ip.Unmap().String(), port)] = true
		return nil
	}
	if !validName(host) {
		return fmt.Errorf("%q: %q is not a host name or address", e, host)
	}
	p.hosts[net.JoinHostPort(normName(host), port)] = true
	return nil
}

// validName accepts DNS names as URLs carry them: letters, digits, '-',
// '_' and dots.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

func normName(s string) string { return strings.TrimSuffix(strings.ToLower(s), ".") }

// unmapPrefix turns ::ffff:10.0.0.0/104 into 10.0.0.0/8, since addresses
// are compared unmapped.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

// Entries returns the allow-list in a canonical form, for logs.
func (p *Policy) Entries() []string {
	var s []string
	for _, n := range p.nets {
		s = append(s, n.String())
	}
	for h := range p.hosts {
		s = append(s, h)
	}
	slices.Sort(s[len(p.nets):])
	return s
}

// RefusedError is a connection the policy did not allow. Its text names
// the host and the address that was refused and how to allow it; it holds
// no more of a URL than host and port.
type RefusedError struct {
	Host   string         // host:port as requested (a name or an address)
	Addr   netip.AddrPort // the address it was about to connect to
	Reason string         // "loopback", "private", "cloud metadata", …
	Flag   string         // the setting that would allow it
}

// Error says what was refused, why, and which entry of Flag would allow it.
func (e *RefusedError) Error() string {
	var b strings.Builder
	ip := e.Addr.Addr().Unmap()
	fmt.Fprintf(&b, "refused to connect to %s", netip.AddrPortFrom(ip, e.Addr.Port()))
	if h, _, _ := net.SplitHostPort(e.Host); h != "" && h != ip.String() && h != e.Addr.Addr().String() {
		fmt.Fprintf(&b, " (%s resolved to it)", e.Host)
	}
	fmt.Fprintf(&b, ": %s is %s %s address, refused unless allowed", ip, article(e.Reason), e.Reason)
	if e.Flag == "" {
		return b.String()
	}
	if isMetadata(e.Reason) {
		fmt.Fprintf(&b, "; to allow it (it may hand out the machine's credentials), add exactly %s to %s", ip, e.Flag)
		return b.String()
	}
	allow := e.Host
	if _, err := netip.ParseAddrPort(e.Host); err == nil || allow == "" {
		allow = netip.AddrPortFrom(ip, e.Addr.Port()).String()
	}
	fmt.Fprintf(&b, "; to allow it, add %s (or a CIDR holding %s) to %s", allow, ip, e.Flag)
	return b.String()
}

// article is the indefinite article before word, as a reason is read.
func article(word string) string {
	if word != "" && strings.ContainsRune("aeiouAEIOU", rune(word[0])) {
		return "an"
	}
	return "a"
}

// Check returns a *RefusedError when the policy does not allow connecting
// to addr for a request to host ("name:port" or "ip:port", as dialled).
func (p *Policy) Check(host string, addr netip.AddrPort) error {
	ip := addr.Addr().WithZone("").Unmap() // a zoned address matches no prefix: drop the zone first
	reason := blockReason(ip)
	if reason == "" || p.allows(host, netip.AddrPortFrom(ip, addr.Port()), reason) {
		return nil
	}
	return &RefusedError{Host: host, Addr: addr, Reason: reason, Flag: p.Flag}
}

// blockReason says why ip is refused by default, or "" when it is not.
func blockReason(ip netip.Addr) string {
	if !ip.IsValid() {
		return "invalid"
	}
	for _, b := range blocked {
		if b.prefix.Contains(ip) {
			return b.reason
		}
	}
	// IPv6 forms that carry an IPv4 address a gateway or relay will reach
	// for us.
	form, v4s := embedded4(ip)
	for _, v4 := range v4s {
		if r := blockReason(v4); r != "" {
			return form + " form of " + article(r) + " " + r
		}
	}
	return ""
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	nat64Loc  = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour = netip.MustParsePrefix("2002::/16")
	teredo    = netip.MustParsePrefix("2001::/32")
)

// embedded4 returns the name of ip's form and the IPv4 addresses inside
// it, for a NAT64 (RFC 6052, last 32 bits), 6to4 (RFC 3056, bits 16-47)
// or Teredo address. A Teredo address (RFC 4380) holds two: the client's, in the last
// 32 bits with every bit flipped, which a relay sends our packets to, and
// its server's, in bits 32-63, which a relay contacts to reach a client
// behind a NAT; either may be made to point inside.
func embedded4(ip netip.Addr) (form string, v4 []netip.Addr) {
	b := ip.As16()
	switch {
	case !ip.Is6():
		return "", nil
	case nat64.Contains(ip) || nat64Loc.Contains(ip):
		return "NAT64", []netip.Addr{netip.AddrFrom4([4]byte(b[12:16]))}
	case sixToFour.Contains(ip):
		return "6to4", []netip.Addr{netip.AddrFrom4([4]byte(b[2:6]))}
	case teredo.Contains(ip):
		client := [4]byte(b[12:16])
		for i := range client {
			client[i] ^= 0xff
		}
		return "Teredo", []netip.Addr{netip.AddrFrom4(client), netip.AddrFrom4([4]byte(b[4:8]))}
	}
	return "", nil
}

// allows reports whether the allow-list opens ip:port, blocked for
// reason, for a request to host. A cloud metadata address is opened only
// by an entry naming that very address: a broad CIDR such as
// 169.254.0.0/16 or 0.0.0.0/0, or a name that happens to resolve to it,
// does not hand out the machine's credentials by accident.
func (p *Policy) allows(host string, ap netip.AddrPort, reason string) bool {
	ip := ap.Addr()
	if p.hosts[ap.String()] {
		return true
	}
	for _, n := range p.nets {
		if n.Contains(ip) && (!isMetadata(reason) || n.IsSingleIP()) {
			return true
		}
	}
	if isMetadata(reason) {
		return false
	}
	h, port, err := net.SplitHostPort(host)
	return err == nil && p.hosts[net.JoinHostPort(normName(h), port)]
}

func isMetadata(reason string) bool { return strings.HasSuffix(reason, metadata) }

type hostKey struct{}

// control is a net.Dialer ControlContext: it runs once for every address
// the dialer tries, after resolution, before the connection is made.
func (p *Policy) control(ctx context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("netguard: cannot read the address %q being dialled: %w", address, err)
	}
	host, _ := ctx.Value(hostKey{}).(string)
	if host == "" {
		host = address
	}
	return p.Check(host, ap)
}

// DialContext returns a dial function for http.Transport.DialContext that
// connects through a copy of d (a zero Dialer when nil) and refuses, per
// address tried, what the policy does not allow. A ControlContext or
// Control that d already has still runs, after the check.
func (p *Policy) DialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var dd net.Dialer
	if d != nil {
		dd = *d
	}
	prev, prevPlain := dd.ControlContext, dd.Control
	dd.Control = nil
	dd.ControlContext = func(ctx context.Context, network, address string, c syscall.RawConn) error {
		if err := p.control(ctx, network, address, c); err != nil {
			return err
		}
		switch {
		case prev != nil:
			return prev(ctx, network, address, c)
		case prevPlain != nil:
			return prevPlain(network, address, c)
		}
		return nil
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dd.DialContext(context.WithValue(ctx, hostKey{}, addr), network, addr)
	}
}

// Transport returns a clone of http.DefaultTransport that dials through
// the policy with d (nil: the default transport's timeouts) and uses no
// proxy: a proxy from HTTP_PROXY or HTTPS_PROXY would be the only address
// dialled, so the policy would check the proxy and never the target.
func (p *Policy) Transport(d *net.Dialer) *http.Transport {
	if d == nil {
		d = &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = p.DialContext(d)
	tr.DialTLSContext = nil
	return tr
}
