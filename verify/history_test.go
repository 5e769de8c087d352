package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHistoryRoundTrip(t *testing.T) {
	dir := t.TempDir()
	h, err := createHistory(historyFile(dir, "w1.2"), "w1.2", -10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	h.write(evStart, num("job", 42), num("seq", 7), num("att", 2), num("tok", 99))
	h.write(evEnd, num("job", 42), num("att", 2), num("tok", 99), str("res", "lease-lost"))
	h.write(evWriteErr, num("job", 42), num("att", 2), num("tok", 99), str("op", "complete"), str("err", "has spaces\nand lines"))
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := createHistory(historyFile(dir, "w1.2"), "w1.2", 0); err == nil {
		t.Error("a second history file of one process was created over the first")
	}
	recs, err := readHistory(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 {
		t.Fatalf("read %d records, want 3", len(recs))
	}
	s, e, w := recs[0], recs[1], recs[2]
	if s.ev != evStart || s.proc != "w1.2" || s.job != 42 || s.seq != 7 || s.att != 2 || s.tok != 99 || s.src != "w1.2.log:1" {
		t.Errorf("start record = %+v", s)
	}
	if e.val != resLeaseLost || e.seq != -1 || e.mono < s.mono {
		t.Errorf("end record = %+v", e)
	}
	if w.val != "complete" || w.get("err") != "has_spaces_and_lines" {
		t.Errorf("werr record = %+v", w)
	}
	// The wall time carries the skew; the monotonic time does not.
	wall, err := time.Parse(time.RFC3339Nano, s.get("wall"))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(wall); d > -9*time.Minute || d < -11*time.Minute {
		t.Errorf("wall time %s is %s from now, want about -10m", wall, d)
	}
}

func TestHistoryTornLastLine(t *testing.T) {
	dir := t.TempDir()
	text := "100 start proc=w0.0 job=1 seq=1 att=1 tok=1\n200 end proc=w0.0 job=1 att"
	if err := os.WriteFile(filepath.Join(dir, "w0.0.log"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := readHistory(dir)
	if err != nil || len(recs) != 1 {
		t.Fatalf("a torn last line: %d records, %v; want the 1 whole line", len(recs), err)
	}
	bad := "100 start proc=w0.0 job=x\n200 end proc=w0.0 job=1 att=1 tok=1 res=ok\n"
	if err := os.WriteFile(filepath.Join(dir, "w0.0.log"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readHistory(dir); err == nil || !strings.Contains(err.Error(), "w0.0.log:1") {
		t.Fatalf("a bad line in the middle: %v, want an error naming it", err)
	}
}

func TestMonoNowIsSystemWide(t *testing.T) {
	if !multiProcess {
		t.Skip("no machine-wide monotonic clock here")
	}
	a := monoNow()
	time.Sleep(10 * time.Millisecond)
	b := monoNow()
	if d := time.Duration(b - a); d < 10*time.Millisecond || d > time.Second {
		t.Errorf("monoNow advanced %s over a 10ms sleep", d)
	}
}
