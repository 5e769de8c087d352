package jobqtest

import "github.com/jobq/jobq/backend"

//go:generate go run ./internal/capgen

// capMask is a set of the optional capabilities (backend/capability.go) a
// backend implements. The bits follow the order of internal/capgen's list.
type capMask uint8

const (
	capNotifier capMask = 1 << iota
	capInline
	capMigrator
	capTxInserter
	capTxCompleter
	capQueueController
	capScheduleStore
	capAll = capNotifier | capInline | capMigrator | capTxInserter | capTxCompleter | capQueueController | capScheduleStore
)

// caps holds the implementation of each capability a composed backend
// promotes; compose reads only the fields its mask names.
type caps struct {
	notifier    backend.Notifier
	inline      backend.Inline
	migrator    backend.Migrator
	txInserter  backend.TxInserter
	txCompleter backend.TxCompleter
	// queueController is passed through as is: pausing and limiting
	// queues is nothing a test records.
	queueController backend.QueueController
	schedules       backend.ScheduleStore
}

// maskOf reports which optional capabilities b implements.
func maskOf(b backend.Backend) capMask {
	var m capMask
	if _, ok := b.(backend.Notifier); ok {
		m |= capNotifier
	}
	if _, ok := b.(backend.Inline); ok {
		m |= capInline
	}
	if _, ok := b.(backend.Migrator); ok {
		m |= capMigrator
	}
	if _, ok := b.(backend.TxInserter); ok {
		m |= capTxInserter
	}
	if _, ok := b.(backend.TxCompleter); ok {
		m |= capTxCompleter
	}
	if _, ok := b.(backend.QueueController); ok {
		m |= capQueueController
	}
	if _, ok := b.(backend.ScheduleStore); ok {
		m |= capScheduleStore
	}
	return m
}
