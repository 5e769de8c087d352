package attemptlog

import (
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq/backend"
)

// A history a PostgreSQL row began before migration 012 holds objects
// and, after it, compact arrays: both read the same.
func TestDecodeBothForms(t *testing.T) {
	got, err := Decode([]byte(`[{"attempt":1,"at_us":1700000000000001,"duration_us":2500,"worker":"a:1","error":"boom"},
		[2,1700000000000002,3000,"b:2","dial tcp: refused"]]`))
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.AttemptError{
		{Attempt: 1, At: time.UnixMicro(1700000000000001).UTC(), Duration: 2500 * time.Microsecond, Worker: "a:1", Error: "boom"},
		{Attempt: 2, At: time.UnixMicro(1700000000000002).UTC(), Duration: 3 * time.Millisecond, Worker: "b:2", Error: "dial tcp: refused"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestDecodeBadCompactEntry(t *testing.T) {
	for in, want := range map[string]string{
		`[[1,2,3,"w"]]`:         "4 values, want 5",
		`[[1,2,3,"w","e",6]]`:   "6 values, want 5",
		`[["one",2,3,"w","e"]]`: "value 0",
		`[[1,2,3,4,"e"]]`:       "value 3",
	} {
		if _, err := Decode([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode(%s) = %v, want an error saying %q", in, err, want)
		}
	}
}

func TestDecodeLinesObjects(t *testing.T) {
	got, err := DecodeLines("{\"attempt\":1,\"at_us\":5,\"duration_us\":1,\"worker\":\"w\",\"error\":\"x\"}\n")
	if err != nil || len(got) != 1 || got[0].Error != "x" || got[0].Attempt != 1 {
		t.Fatalf("DecodeLines = %+v, %v", got, err)
	}
}
