package backend

import (
	"errors"
	"slices"
	"testing"
)

func TestParseJobState(t *testing.T) {
	t.Parallel()
	for _, st := range jobStates {
		if got, err := ParseJobState(string(st)); got != st || err != nil {
			t.Errorf("ParseJobState(%q) = %q, %v; want it back", st, got, err)
		}
	}
	// Names are matched exactly: what the stores, the API and the CLI
	// print is what they take back.
	for _, s := range []string{"", "Pending", " pending", "done", "running", "waiting"} {
		got, err := ParseJobState(s)
		var ie *InputError
		if got != "" || !errors.Is(err, ErrInvalidInput) || !errors.As(err, &ie) || ie.Field != "state" {
			t.Errorf("ParseJobState(%q) = %q, %v; want an InputError on state", s, got, err)
		}
	}
	_, err := ParseJobState("x")
	want := `invalid state: "x": want pending, scheduled, reserved, cancelling, failed, completed or cancelled`
	if err == nil || err.Error() != want {
		t.Errorf("ParseJobState(x) = %v, want %s", err, want)
	}
}

func TestValidateStatesPerCall(t *testing.T) {
	t.Parallel()
	live := map[JobState]bool{StatePending: true, StateScheduled: true, StateReserved: true}
	kept := map[JobState]bool{StateCompleted: true, StateCancelled: true}
	for _, st := range slices.Concat(jobStates, []JobState{"", "bogus"}) {
		if err := ValidateLiveState(st); (err == nil) != live[st] || err != nil && !errors.Is(err, ErrInvalidInput) {
			t.Errorf("ValidateLiveState(%q) = %v", st, err)
		}
		if err := ValidateKeptState(st); (err == nil) != kept[st] || err != nil && !errors.Is(err, ErrInvalidInput) {
			t.Errorf("ValidateKeptState(%q) = %v", st, err)
		}
	}
}
