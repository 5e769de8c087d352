package jobq_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Worker processes for process_test.go re-execute this test binary.
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	if os.Getenv(cancelChildEnv) != "" {
		os.Exit(runCancelChild())
	}
	if os.Getenv(waitChildEnv) != "" {
		os.Exit(runWaitChild())
	}
	if os.Getenv(cronChildEnv) != "" {
		os.Exit(runCronChild())
	}
	if os.Getenv(uniqueChildEnv) != "" {
		os.Exit(runUniqueChild())
	}
	goleak.VerifyTestMain(m)
}
