package backend

import (
	"errors"
	"testing"
	"time"
)

func TestCheckDeadlines(t *testing.T) {
	now := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	ok := InsertParams{Deadline: now.Add(time.Minute)}
	cases := []struct {
		name string
		p    InsertParams
		bad  bool
	}{
		{"none", InsertParams{}, false},
		{"future", ok, false},
		{"at due time", InsertParams{Delay: time.Minute, Deadline: now.Add(time.Minute)}, false},
		{"now", InsertParams{Deadline: now}, true},
		{"passed", InsertParams{Deadline: now.Add(-time.Second)}, true},
		{"before delay", InsertParams{Delay: time.Hour, Deadline: now.Add(time.Minute)}, true},
		{"before run at", InsertParams{RunAt: now.Add(time.Hour), Deadline: now.Add(time.Minute)}, true},
	}
	for _, c := range cases {
		err := CheckDeadlines([]InsertParams{ok, c.p}, now)
		var ie *InputError
		if got := errors.As(err, &ie) && ie.Field == "deadline" && errors.Is(err, ErrInvalidInput); got != c.bad {
			t.Errorf("%s: CheckDeadlines = %v, want refused %v", c.name, err, c.bad)
		}
	}
}

func TestValidateDeadline(t *testing.T) {
	base := InsertParams{Queue: "q", Type: "t", Payload: []byte(`{}`), MaxAttempts: 1, Deadline: time.Now().Add(time.Hour)}
	if err := ValidateInsert(base); err != nil {
		t.Fatalf("ValidateInsert with a deadline: %v", err)
	}
	keyed := base
	keyed.Key = "k"
	replace := base
	replace.UniqueKey, replace.OnConflict = "u", ConflictReplace
	for _, p := range []InsertParams{keyed, replace} {
		var ie *InputError
		if err := ValidateInsert(p); !errors.As(err, &ie) || ie.Field != "deadline" {
			t.Errorf("ValidateInsert(%+v) = %v, want a deadline error", p, err)
		}
	}
	if got, want := DeadlineError(time.Date(2026, 12, 5, 9, 0, 0, 500, time.FixedZone("x", 3600))), "deadline exceeded: not started by 2026-12-05T08:00:00Z"; got != want {
		t.Errorf("DeadlineError = %q, want %q", got, want)
	}
}
