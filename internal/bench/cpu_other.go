//go:build !unix

package bench

import "time"

// cpuTime says nothing where getrusage is missing: the results then omit
// CPU time.
func cpuTime() time.Duration { return -1 }
