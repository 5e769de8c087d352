package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any leave a goroutine running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
