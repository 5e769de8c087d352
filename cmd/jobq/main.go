// Command jobq runs workers, enqueues jobs and inspects queues from the
// command line. It is a thin layer over the jobq library: see the README.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := interruptible(context.Background())
	err := newRootCmd(os.Stdout, os.Stderr).ExecuteContext(ctx)
	stop()
	if err != nil {
		// 'jobq check' has printed its one line already.
		if ce := (checkExit{}); !errors.As(err, &ce) {
			fmt.Fprintln(os.Stderr, "jobq: "+err.Error())
		}
		os.Exit(exitCode(err))
	}
}

// interruptible returns a context that the first SIGINT or SIGTERM cancels,
// which starts the command's graceful stop; a second one exits the process
// at once with 128 + the signal's number (130, 143), for when that stop
// takes longer than the user will wait. stop ends the watch.
func interruptible(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	quit := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			cancel(fmt.Errorf("received %v", sig))
		case <-quit:
			return
		}
		select {
		case sig := <-sigs:
			fmt.Fprintf(os.Stderr, "jobq: received %v again: exiting now, without waiting for running work\n", sig)
			code := exitError
			if s, ok := sig.(syscall.Signal); ok {
				code = exitSignal + int(s)
			}
			os.Exit(code)
		case <-quit:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(quit)
		cancel(nil)
	}
}
