package backend

import (
	"strings"
	"testing"
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
