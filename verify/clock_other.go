//go:build !unix

package verify

import "time"

// multiProcess says whether this platform can run worker processes and
// fault them: not here, so only the memory backend (one process) runs.
const multiProcess = false

var epoch = time.Now()

// monoNow is this process's monotonic clock in nanoseconds: enough for a
// run whose workers all live in this process.
func monoNow() int64 { return int64(time.Since(epoch)) }
