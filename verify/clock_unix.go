//go:build unix

package verify

import "golang.org/x/sys/unix"

// multiProcess says whether this platform can run worker processes and
// fault them (signals, a machine-wide monotonic clock).
const multiProcess = true

// monoNow reads CLOCK_MONOTONIC in nanoseconds. It is one clock for every
// process on the machine (Go's own monotonic readings are private to a
// process), never jumps with the wall clock, and keeps counting while a
// process is stopped, so the times that the verifier and its workers
// write compare directly.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("verify: clock_gettime(CLOCK_MONOTONIC): " + err.Error())
	}
	return ts.Nano()
}
