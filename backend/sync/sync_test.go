package sync_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/jobq/jobq/backend/backendtest"
	"github.com/jobq/jobq/backend/sync"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	backendtest.RunInline(t, func(t *testing.T) backendtest.InlineBackend { return sync.New() })
}
