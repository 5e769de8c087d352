// Package httpserve runs an http.Server for as long as a context lasts:
// what the metrics endpoint and the admin server ('jobq serve') share.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"
)

// Bounds on a connection of New's servers. Without them one client holds
// a connection (and its goroutine and buffers) as long as it likes by
// sending its body, or reading the answer, a byte at a time; a few hundred
// such clients hold the server.
const (
	// DefaultReadTimeout bounds reading a whole request, body included.
	DefaultReadTimeout = 30 * time.Second
	headerTimeout      = 10 * time.Second
	// writeTimeout bounds a handler and the writing of its answer.
	writeTimeout = 2 * time.Minute
	idleTimeout  = time.Minute
	// maxHeaderBytes is what a request line and headers may take; Go's
	// default is 1 MiB, far more than a browser or an API client sends.
	maxHeaderBytes = 64 << 10
)

// New returns a server for h with every read and write bounded: the
// request (header and body) within read (DefaultReadTimeout when zero),
// its header within 10 s, the answer within 2 minutes, an idle
// keep-alive connection for a minute, the header to 64 KiB (431 beyond).
// log receives the server's own errors, such as a TLS handshake's.
func New(h http.Handler, read time.Duration, log *log.Logger) *http.Server {
	if read <= 0 {
		read = DefaultReadTimeout
	}
	return &http.Server{
		Handler: h, ReadTimeout: read, ReadHeaderTimeout: min(headerTimeout, read),
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog: log,
	}
}

// Until serves srv on l until ctx ends, then shuts down gracefully: it
// stops accepting, lets requests in progress finish for up to grace, then
// closes what is left, and closes l. It returns nil after a shutdown ctx
// asked for, or the error that stopped serving; what names the server in
// errors ("metrics", "admin").
func Until(ctx context.Context, srv *http.Server, l net.Listener, grace time.Duration, what string) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve %s on %s: %w", what, l.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	<-served // http.ErrServerClosed
	if err != nil {
		return fmt.Errorf("stop %s server on %s: %w", what, l.Addr(), err)
	}
	return nil
}
