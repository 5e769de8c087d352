package redis

import (
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Job and failed-job IDs: ts<<queueBits | queue index, where ts counts
// microseconds since idEpoch and is strictly increasing per queue (see
// minter in scripts.lua). So an ID is unique across the key prefix, grows
// with time across queues (older first, newest first hold between queues
// too), and names its queue, which JobGet, FailedGet and every fenced write
// need to find the job's keys from the ID alone. With 12 bits of queue
// index, ts has 51 bits: until 2096. Within a queue's keys an ID is its
// time part as 13 hex digits (tsHex), so sorted-set members order like the
// IDs and no script sees a number beyond 2^53; the unique-key hash, which
// spans queues, keeps whole IDs as 16 hex digits (idHex).
const (
	queueBits = 12
	// MaxQueues is how many queues one key prefix can hold: each gets one
	// of the 12-bit queue indexes its IDs end in, for good.
	MaxQueues = 1<<queueBits - 1
	queueMask = 1<<queueBits - 1
)

// idEpoch is the zero of the time part of IDs (EPOCH_US in scripts.lua).
var idEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// makeID returns the ID of time part ts in the queue of index q.
func makeID(ts int64, q int) int64 { return ts<<queueBits | int64(q) }

// queueIndexOf returns the index of the queue an ID belongs to.
func queueIndexOf(id int64) int { return int(id & queueMask) }

// idTime returns the time part of an ID as a time: when a failed ID was
// minted is its job's failed_at.
func idTime(id int64) time.Time { return idEpoch.Add(time.Duration(id>>queueBits) * time.Microsecond) }

const hexDigits = "0123456789abcdef"

// idHex is a whole ID as 16 lowercase hex digits.
func idHex(id int64) string { return hexN(uint64(id), 16) }

// tsHex is an ID's form within its queue's keys: its time part as 13
// lowercase hex digits (tshex in scripts.lua).
func tsHex(id int64) string { return hexN(uint64(id)>>queueBits, 13) }

func hexN(u uint64, n int) string {
	var buf [16]byte
	for i := n - 1; i >= 0; i-- {
		buf[i] = hexDigits[u&0xf]
		u >>= 4
	}
	return string(buf[:n])
}

// parseIDHex reads an ID written by idHex.
func parseIDHex(s string) (int64, error) {
	u, err := strconv.ParseUint(s, 16, 64)
	if len(s) != 16 || err != nil || u >= 1<<63 {
		return 0, fmt.Errorf("malformed ID %q", s)
	}
	return int64(u), nil
}

// tsBelow returns the exclusive upper bound on the time parts of a
// queue's IDs that are below the ID upper, which may belong to another
// queue: ts<<12|q < upper ⟺ ts < tsBelow(upper, q).
func tsBelow(upper int64, q int) string {
	return hexN(uint64((upper-int64(q)-1)>>queueBits+1), 13)
}

// parseTS reads a time part written by tsHex and returns the ID it makes
// in the queue of index q.
func parseTS(s string, q int) (int64, error) {
	u, err := strconv.ParseUint(s, 16, 64)
	if len(s) != 13 || err != nil || u >= 1<<(63-queueBits) {
		return 0, fmt.Errorf("malformed ID %q", s)
	}
	return makeID(int64(u), q), nil
}

// keyspace names every key of one key prefix. A key has one name: its
// field here or in queueKeys, the name script declarations (scripts.go)
// and script headers give it, and its entry in the key legend at the top
// of scripts.lua, which shows the key string behind it (TestKeyNames and
// TestScriptKeys check that they agree). Per-queue names are built once
// and cached.
type keyspace struct {
	prefix string
	schema string // the data layout version
	queues string // the queue registry
	unique string // unique key -> holder
	// schedules is schedule name -> definition (schedule.go)
	schedules string
	// cancels is raised after every cancel request that marked a running
	// job (cancel.go)
	cancels string
	// pruneTurn is the prune turn's holder, with an expiry (retention.go)
	pruneTurn string

	mu     sync.RWMutex
	byName map[string]*queueKeys
}

func newKeyspace(prefix string) *keyspace {
	return &keyspace{
		prefix:    prefix,
		schema:    prefix + ":schema",
		queues:    prefix + ":queues",
		unique:    prefix + ":unique",
		schedules: prefix + ":schedules",
		cancels:   prefix + ":cancels",
		pruneTurn: prefix + ":turn:prune",
		byName:    map[string]*queueKeys{},
	}
}

// queueKeys are the keys of one queue, all with the hash tag {queue} so
// that every script on them runs in one Cluster slot. The comments give
// each key's string after "P:{Q}:"; the legend in scripts.lua says what
// it holds.
type queueKeys struct {
	name           string
	lastTS         string // t
	ready          string // q
	readyOld       string // p: only read, to move its jobs into ready (adopt in scripts.lua)
	readyList      string // l
	readyAt        string // o
	readyAtCounts  string // n
	delayed        string // d
	reserved       string // r
	failed         string // f
	settings       string // s (queues.go)
	jobPrefix      string // j:
	failedPrefix   string // x:
	failedByJob    string // xj
	channel        string // w: not a key, the queue's pub/sub channel
	cancelling     string // c (cancel.go)
	completed      string // kc (retention.go)
	completedAt    string // kct
	cancelled      string // kx
	cancelledAt    string // kxt
	finishedPrefix string // y:
	ticks          string // ts (schedule.go)
	inserted       string // i (inserted.go)
	deadlines      string // e
}

// queue returns the keys of queue q.
func (ks *keyspace) queue(q string) *queueKeys {
	ks.mu.RLock()
	k := ks.byName[q]
	ks.mu.RUnlock()
	if k != nil {
		return k
	}
	base := ks.prefix + ":{" + q + "}:"
	k = &queueKeys{
		name: q, lastTS: base + "t", ready: base + "q", readyOld: base + "p", readyList: base + "l", readyAt: base + "o",
		readyAtCounts: base + "n", delayed: base + "d", reserved: base + "r", failed: base + "f", settings: base + "s",
		jobPrefix: base + "j:", failedPrefix: base + "x:", failedByJob: base + "xj", channel: base + "w",
		cancelling: base + "c", completed: base + "kc", completedAt: base + "kct",
		cancelled: base + "kx", cancelledAt: base + "kxt", finishedPrefix: base + "y:",
		ticks: base + "ts", inserted: base + "i", deadlines: base + "e",
	}
	ks.mu.Lock()
	if len(ks.byName) < 4*MaxQueues { // bounded: queue names may come from callers
		ks.byName[q] = k
	}
	ks.mu.Unlock()
	return k
}

// queueKeyNames resolves the names of a queue's keys that scripts take:
// script declarations are resolved through it once, at init, so that
// building a call's KEYS costs no lookup. base (workflow.go) is the
// queue's key prefix, which scripts extend to keys they are not given.
var queueKeyNames = map[string]func(*queueKeys) string{
	"lastTS":         func(k *queueKeys) string { return k.lastTS },
	"ready":          func(k *queueKeys) string { return k.ready },
	"readyOld":       func(k *queueKeys) string { return k.readyOld },
	"readyList":      func(k *queueKeys) string { return k.readyList },
	"readyAt":        func(k *queueKeys) string { return k.readyAt },
	"readyAtCounts":  func(k *queueKeys) string { return k.readyAtCounts },
	"delayed":        func(k *queueKeys) string { return k.delayed },
	"reserved":       func(k *queueKeys) string { return k.reserved },
	"failed":         func(k *queueKeys) string { return k.failed },
	"settings":       func(k *queueKeys) string { return k.settings },
	"jobPrefix":      func(k *queueKeys) string { return k.jobPrefix },
	"failedPrefix":   func(k *queueKeys) string { return k.failedPrefix },
	"failedByJob":    func(k *queueKeys) string { return k.failedByJob },
	"cancelling":     func(k *queueKeys) string { return k.cancelling },
	"completed":      func(k *queueKeys) string { return k.completed },
	"completedAt":    func(k *queueKeys) string { return k.completedAt },
	"cancelled":      func(k *queueKeys) string { return k.cancelled },
	"cancelledAt":    func(k *queueKeys) string { return k.cancelledAt },
	"finishedPrefix": func(k *queueKeys) string { return k.finishedPrefix },
	"ticks":          func(k *queueKeys) string { return k.ticks },
	"inserted":       func(k *queueKeys) string { return k.inserted },
	"deadlines":      func(k *queueKeys) string { return k.deadlines },
	"base":           (*queueKeys).base,
}

// itemKeyNames resolves the names of the keys a script takes one of per
// item (a job or failed job named by its ID).
var itemKeyNames = map[string]func(*queueKeys, int64) string{
	"job":       (*queueKeys).job,
	"failedJob": (*queueKeys).failedJob,
}

// prefixKeyNames resolves the names of the keys of the whole prefix that
// scripts take.
var prefixKeyNames = map[string]func(*keyspace) string{
	"queues":    func(ks *keyspace) string { return ks.queues },
	"unique":    func(ks *keyspace) string { return ks.unique },
	"schedules": func(ks *keyspace) string { return ks.schedules },
	"pruneTurn": func(ks *keyspace) string { return ks.pruneTurn },
}

// job returns the key of the live job with ID id.
func (k *queueKeys) job(id int64) string { return k.jobPrefix + tsHex(id) }

// failedJob returns the key of the failed job with failed ID fid.
func (k *queueKeys) failedJob(fid int64) string { return k.failedPrefix + tsHex(fid) }

// finishedJob returns the key of the kept finished job with ID id.
func (k *queueKeys) finishedJob(id int64) string { return k.finishedPrefix + tsHex(id) }

// queueOfChannel returns the queue whose wake-up channel is ch, or false.
func (ks *keyspace) queueOfChannel(ch string) (string, bool) {
	head := ks.prefix + ":{"
	if len(ch) < len(head)+4 || ch[:len(head)] != head || ch[len(ch)-3:] != "}:w" {
		return "", false
	}
	return ch[len(head) : len(ch)-3], true
}
