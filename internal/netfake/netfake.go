// Package netfake starts the misbehaving servers the backends' tests dial:
// one that accepts and never answers, and a TLS-only one, so a test shows
// that every network step of opening a store ends within its timeout
// whatever the server does. Each server lives until its test ends, and
// then closes its connections and waits for its goroutines (goleak).
package netfake

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"
)

// servers keeps the connections of a test server open until the test
// ends.
type servers struct {
	ln    net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
}

func (s *servers) keep(c net.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns = append(s.conns, c)
}

func (s *servers) stop() {
	_ = s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// Serve accepts connections on a fresh port of 127.0.0.1 and hands each
// to handle, in a goroutine of its own, until the test ends. It returns
// the address.
func Serve(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &servers{ln: ln}
	t.Cleanup(s.stop)
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.keep(c)
			s.wg.Go(func() { handle(c) })
		}
	})
	return ln.Addr().String()
}

// Silent accepts connections and never sends a byte: a hung server, or a
// port something else holds.
func Silent(t testing.TB) string {
	return Serve(t, func(net.Conn) {})
}

// TLS is a TLS-only port: it completes each TLS handshake (with a
// certificate for 127.0.0.1 that roots trusts) within handshake and then
// says nothing, and closes a connection whose handshake fails, as a TLS
// port does when a client speaks plain text to it.
func TLS(t testing.TB, handshake time.Duration) (addr string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	cfg := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	addr = Serve(t, func(c net.Conn) {
		tc := tls.Server(c, cfg)
		_ = c.SetDeadline(time.Now().Add(handshake))
		if err := tc.Handshake(); err != nil {
			_ = c.Close()
			return
		}
		_ = c.SetDeadline(time.Time{})
	})
	return addr, roots
}
