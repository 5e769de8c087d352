package postgres

import (
	"testing"

	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/backend/backendtest"
)

func TestConformance(t *testing.T) {
	testURL(t)
	backendtest.Run(t, backendtest.Harness{
		New: func(t *testing.T) backend.Backend { return openTest(t, Options{}) },
	})
}
