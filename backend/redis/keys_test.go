package redis

import (
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

const maxTS = 1<<51 - 1

// TestIDLayout: IDs fit int64 with room to spare, name their queue and
// time, and order like their time parts.
func TestIDLayout(t *testing.T) {
	top := makeID(maxTS, MaxQueues)
	if top <= 0 || uint64(top) >= 1<<63 {
		t.Fatalf("largest ID %d is outside int64", top)
	}
	if got := idTime(makeID(maxTS, 1)); got.Year() != 2096 {
		t.Fatalf("IDs run out in %d, want 2096", got.Year())
	}
	for _, tc := range []struct {
		ts int64
		q  int
	}{{0, 1}, {1, MaxQueues}, {maxTS, 1}, {maxTS, MaxQueues}, {123456789012345, 77}} {
		id := makeID(tc.ts, tc.q)
		if queueIndexOf(id) != tc.q {
			t.Errorf("queueIndexOf(makeID(%d, %d)) = %d", tc.ts, tc.q, queueIndexOf(id))
		}
		if want := idEpoch.Add(time.Duration(tc.ts) * time.Microsecond); !idTime(id).Equal(want) {
			t.Errorf("idTime(%d) = %v, want %v", id, idTime(id), want)
		}
		h := tsHex(id)
		if len(h) != 13 {
			t.Errorf("tsHex(%d) = %q, want 13 digits", id, h)
		}
		if back, err := parseTS(h, tc.q); err != nil || back != id {
			t.Errorf("parseTS(%q, %d) = %d, %v; want %d", h, tc.q, back, err, id)
		}
		if back, err := parseIDHex(idHex(id)); err != nil || back != id {
			t.Errorf("parseIDHex(idHex(%d)) = %d, %v", id, back, err)
		}
	}
	for _, bad := range []string{"", "123", "zzzzzzzzzzzzz", "fffffffffffff"} {
		if _, err := parseTS(bad, 1); err == nil {
			t.Errorf("parseTS(%q) accepted", bad)
		}
	}
	// Hex text orders like the numbers (sorted-set members rely on it).
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		a, b := r.Int64N(maxTS+1), r.Int64N(maxTS+1)
		if (a < b) != (tsHex(makeID(a, 1)) < tsHex(makeID(b, 1))) {
			t.Fatalf("ts %d and %d order differently as hex", a, b)
		}
	}
}

// TestTSBelow: the per-queue bound of "ID below upper" is exact at equal
// time parts in different queues (paging with an ID of another queue).
func TestTSBelow(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		ts, q := r.Int64N(maxTS), 1+r.IntN(MaxQueues)
		upper := makeID(1+r.Int64N(maxTS), 1+r.IntN(MaxQueues))
		if r.IntN(2) == 0 {
			ts = upper >> queueBits // the interesting case: the same time part
		}
		below := makeID(ts, q) < upper
		if got := tsHex(makeID(ts, q)) < tsBelow(upper, q); got != below {
			t.Fatalf("ts %d queue %d upper %d: bound says %t, want %t", ts, q, upper, got, below)
		}
	}
}

// TestLuaIDFormat: scripts format time parts exactly like Go, up to the
// largest, which a Lua number (a double) still holds exactly.
func TestLuaIDFormat(t *testing.T) {
	b := openTest(t, Options{})
	s := newScript("idformat", withHelpers(`
local out = {}
for i = 1, #ARGV do out[i] = tshex(tonumber(ARGV[i])) end
return out`))
	tss := []int64{0, 1, 4095, 1 << 32, maxTS - 1, maxTS, 987654321012345}
	args := make([]any, len(tss))
	for i, ts := range tss {
		args[i] = ts
	}
	res, err := b.c.eval(t.Context(), s, []string{b.keys.queue("q").lastTS}, args)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := res.([]any)
	for i, ts := range tss {
		if want := tsHex(makeID(ts, 1)); i >= len(got) || got[i] != want {
			t.Errorf("tshex(%d) in Lua = %v, want %s", ts, got[i], want)
		}
	}
}

// TestTimePrecision: times are kept to the microsecond, far in the future
// too (scores and fields are µs since 1970, exact in a double until 2255).
func TestTimePrecision(t *testing.T) {
	b := openTest(t, Options{})
	runAt := time.Date(2200, 7, 1, 12, 30, 45, 123456789, time.UTC)
	res, err := b.JobInsertMany(t.Context(), []backend.InsertParams{{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1, RunAt: runAt}})
	if err != nil {
		t.Fatal(err)
	}
	row, err := b.JobGet(t.Context(), res[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := runAt.Truncate(time.Microsecond); !row.AvailableAt.Equal(want) {
		t.Fatalf("AvailableAt %v, want %v", row.AvailableAt, want)
	}
	// The delayed set's score for it is as exact: the job is scheduled, not
	// due, and its queue's stats say so.
	st, err := b.QueueStats(t.Context())
	if err != nil || len(st) != 1 || st[0].Scheduled != 1 {
		t.Fatalf("QueueStats = %+v, %v; want 1 scheduled", st, err)
	}
}

// TestKeyNames: a key has one name. Each key field of keyspace and
// queueKeys is in the key legend of scripts.lua under its own name, with
// the key string the field holds; each name script declarations resolve
// (queueKeyNames, itemKeyNames, prefixKeyNames) gives the key of the
// legend entry of that name; and the legend names nothing else.
func TestKeyNames(t *testing.T) {
	legend := map[string]string{}
	for _, m := range legendEntry.FindAllStringSubmatch(scriptsSource, -1) {
		if _, dup := legend[m[1]]; dup {
			t.Errorf("legend names %s twice", m[1])
		}
		legend[m[1]] = m[2]
	}
	// With prefix P and queue Q, a key is its legend's text.
	ks := newKeyspace("P")
	q := ks.queue("Q")
	id := makeID(12345, 1)
	named := map[string]bool{}
	seen := map[string]string{}
	check := func(what, name, key string) {
		t.Helper()
		named[name] = true
		if want, ok := legend[name]; !ok {
			t.Errorf("%s %s is not in the key legend of scripts.lua", what, name)
		} else if want = strings.ReplaceAll(want, "<ts>", tsHex(id)); key != want {
			t.Errorf("%s %s is %q; the legend has %q", what, name, key, want)
		}
		if other, ok := seen[key]; ok && other != name {
			t.Errorf("key %q has two names, %s and %s", key, other, name)
		}
		seen[key] = name
	}
	fields := func(v reflect.Value, skip string) {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if f.Type.Kind() == reflect.String && f.Name != skip {
				check("field "+v.Type().Name()+"."+f.Name, f.Name, v.Field(i).String())
			}
		}
	}
	fields(reflect.ValueOf(ks).Elem(), "prefix")
	fields(reflect.ValueOf(q).Elem(), "name")
	for name, key := range queueKeyNames {
		check("queueKeyNames", name, key(q))
	}
	for name, key := range itemKeyNames {
		check("itemKeyNames", name, key(q, id))
	}
	for name, key := range prefixKeyNames {
		check("prefixKeyNames", name, key(ks))
	}
	for name := range legend {
		if !named[name] {
			t.Errorf("the key legend names %s, which keys.go does not", name)
		}
	}
	if len(legend) < 30 {
		t.Errorf("read %d entries of the key legend; its format changed?", len(legend))
	}
}

// legendEntry is an entry of the key legend of scripts.lua: name, key.
var legendEntry = regexp.MustCompile(`(?m)^--   ([a-z][A-Za-z]*) +(P:\S*)`)
