package bench

import (
	"runtime"
	"time"
)

// cost is what the whole process had spent at one moment: CPU time (user
// and system: the workers', the producers', the garbage collector's),
// bytes allocated and garbage collections. With a worker process
// (Config.WorkerProcess) the bench's cost is both processes' added up:
// the worker process reports its own on request. Taken at both ends of a timed
// part, it says what the throughput cost. On a shared machine throughput
// drifts with the neighbours; CPU time per job drifts much less, and the
// collections say what the garbage cost.
type cost struct {
	cpu   time.Duration // -1 where the platform does not say
	alloc uint64
	gcs   uint32
}

func costNow() cost {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return cost{cpu: cpuTime(), alloc: ms.TotalAlloc, gcs: ms.NumGC}
}

// plus is c and d added up: two processes' costs (CPU unknown when
// either's is).
func (c cost) plus(d cost) cost {
	s := cost{cpu: c.cpu + d.cpu, alloc: c.alloc + d.alloc, gcs: c.gcs + d.gcs}
	if c.cpu < 0 || d.cpu < 0 {
		s.cpu = -1
	}
	return s
}

// addCost sets r's cost fields from c0 and c1, taken when its timed part
// started and ended, per job of r.Jobs.
func (r *Result) addCost(c0, c1 cost) {
	if r.Jobs <= 0 {
		return
	}
	if c0.cpu >= 0 && c1.cpu >= 0 {
		r.CPUMicrosPerJob = round(float64((c1.cpu - c0.cpu).Microseconds()) / float64(r.Jobs))
	}
	r.AllocBytesPerJob = int64(c1.alloc-c0.alloc) / r.Jobs
	r.GCs = c1.gcs - c0.gcs
}
