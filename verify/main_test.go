package verify

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The end-to-end tests' worker processes are this test binary run
	// again, with WorkerEnv set (see testWorkerCommand).
	if IsWorker() {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		err := WorkerMain(ctx)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// testWorkerCommand starts this test binary as a worker process.
func testWorkerCommand() []string { return []string{os.Args[0], "-test.run=^$"} }
