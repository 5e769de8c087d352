package backend

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValidateQueue(t *testing.T) {
	t.Parallel()
	good := []string{"default", "a", "mail.high", "tenant:42", "Q_1-x", "9", strings.Repeat("q", MaxQueueLen)}
	bad := []string{"", " ", "two words", "_lead", "-lead", ".lead", "é", "q/1", "q\n", strings.Repeat("q", MaxQueueLen+1)}
	for _, q := range good {
		if err := ValidateQueue(q); err != nil {
			t.Errorf("ValidateQueue(%q) = %v, want nil", q, err)
		}
	}
	for _, q := range bad {
		if err := ValidateQueue(q); err == nil {
			t.Errorf("ValidateQueue(%q) = nil, want an error", q)
		}
	}
}

func TestValidateQueueShortensLongNames(t *testing.T) {
	t.Parallel()
	err := ValidateQueue(strings.Repeat("x", 100_000))
	if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "100000 bytes") {
		t.Fatalf("error for a 100 kB queue name: %.400v; want a short one giving the length", err)
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	long := "HEAD" + strings.Repeat("é", MaxErrorBytes) + "TAIL€"
	cases := []struct {
		name, in string
		check    func(out string) bool
	}{
		{"clean text unchanged", "smtp: 451 try later", func(o string) bool { return o == "smtp: 451 try later" }},
		{"cut multi-byte character", "price 5 \xe2\x82", func(o string) bool { return o == "price 5 \uFFFD" }},
		{"NUL", "a\x00b", func(o string) bool { return o == "a\uFFFDb" }},
		{"exactly the limit", strings.Repeat("x", MaxErrorBytes), func(o string) bool { return len(o) == MaxErrorBytes }},
		{"long keeps head and tail", long, func(o string) bool {
			return len(o) <= MaxErrorBytes && strings.HasPrefix(o, "HEAD") && strings.HasSuffix(o, "TAIL€") &&
				strings.Contains(o, "bytes cut]") && utf8.ValidString(o)
		}},
		{"long and dirty", strings.Repeat("\x00\xff", MaxErrorBytes), func(o string) bool {
			return len(o) <= MaxErrorBytes && utf8.ValidString(o) && !strings.ContainsRune(o, 0)
		}},
	}
	for _, c := range cases {
		out := ErrorText(c.in)
		if !c.check(out) {
			t.Errorf("%s: ErrorText gave %d bytes %.80q", c.name, len(out), out)
		}
		if again := ErrorText(out); again != out {
			t.Errorf("%s: ErrorText is not idempotent", c.name)
		}
	}
}

func TestPrepareOutcomesCopiesOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	clean := []Outcome{{Ref: JobRef{ID: 1, Attempt: 1}, Kind: OutcomeRetry, Error: "x"}}
	got, err := PrepareOutcomes(clean)
	if err != nil || &got[0] != &clean[0] {
		t.Fatalf("clean batch: %v, copied = %v; want the caller's slice back", err, &got[0] != &clean[0])
	}
	dirty := []Outcome{{Ref: JobRef{ID: 1, Attempt: 1}, Kind: OutcomeFail, Error: "\xff"}}
	got, err = PrepareOutcomes(dirty)
	if err != nil || got[0].Error != "\uFFFD" || dirty[0].Error != "\xff" {
		t.Fatalf("dirty batch: %v %q, caller's %q; want a normalised copy and the caller's slice untouched", err, got[0].Error, dirty[0].Error)
	}
	if _, err := PrepareOutcomes([]Outcome{{Kind: OutcomeRetry, RetryDelay: -1}}); err == nil {
		t.Fatal("a negative retry delay was accepted")
	}
}

func TestValidateMetadata(t *testing.T) {
	t.Parallel()
	if err := ValidateMetadata(map[string]string{"traceparent": "00-1-2-01", "tenant": "é"}); err != nil {
		t.Fatalf("good metadata refused: %v", err)
	}
	many := map[string]string{}
	for i := range MaxMetadataKeys + 1 {
		many[strings.Repeat("k", i+1)] = ""
	}
	for name, m := range map[string]map[string]string{
		"too many keys": many,
		"too big":       {"k": strings.Repeat("v", MaxMetadataBytes)},
		"empty key":     {"": "v"},
		"long key":      {strings.Repeat("k", MaxMetadataKeyBytes+1): "v"},
		"NUL value":     {"k": "a\x00"},
		"bad UTF-8 key": {"\xff": "v"},
	} {
		if err := ValidateMetadata(m); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "metadata") {
			t.Errorf("%s: %v; want ErrInvalidInput naming metadata", name, err)
		}
	}
}
