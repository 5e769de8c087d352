// Package httpserve runs an http.Server for as long as a context lasts:
// what the metrics endpoint and the admin server ('jobq serve') share.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

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
