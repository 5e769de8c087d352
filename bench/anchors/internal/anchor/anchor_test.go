package anchor

import (
	"testing"
	"time"
)

func TestPercentilesOfIsNearestRank(t *testing.T) {
	lats := make([]time.Duration, 100)
	for i := range lats {
		lats[len(lats)-1-i] = time.Duration(i+1) * time.Millisecond // unsorted
	}
	got := PercentilesOf(lats)
	want := Percentiles{P50Ms: 50, P90Ms: 90, P99Ms: 99, MaxMs: 100}
	if got != want {
		t.Errorf("PercentilesOf = %+v, want %+v", got, want)
	}
}

func TestParseRedisURLRefusesDatabaseZero(t *testing.T) {
	got, err := ParseRedisURL("redis://127.0.0.1:6379/9?key_prefix=x")
	if err != nil || got != (RedisDB{Addr: "127.0.0.1:6379", DB: 9}) {
		t.Errorf("ParseRedisURL = %+v, %v", got, err)
	}
	for _, u := range []string{"redis://127.0.0.1:6379", "redis://127.0.0.1:6379/0", "rediss://h:1/3", "h:6379/3"} {
		if _, err := ParseRedisURL(u); err == nil {
			t.Errorf("ParseRedisURL(%q) accepted", u)
		}
	}
}

func TestRoundAsJobqBench(t *testing.T) {
	for in, want := range map[float64]float64{1234.6: 1235, 12.345: 12.35, 0.0012345: 0.001234} {
		if got := Round(in); got != want {
			t.Errorf("Round(%v) = %v, want %v", in, got, want)
		}
	}
}
