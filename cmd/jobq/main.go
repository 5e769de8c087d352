// Command jobq runs workers, enqueues jobs and inspects queues from the
// command line. It is a thin layer over the jobq library: see the README.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCmd(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobq: "+err.Error())
		os.Exit(exitCode(err))
	}
}
