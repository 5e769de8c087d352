package jobqtest_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backend"
	"github.com/jobq/jobq/jobqtest"
)

type order struct {
	ID    int      `json:"id"`
	Items []string `json:"items"`
	Ship  struct {
		City string `json:"city"`
		Zip  string `json:"zip"`
	} `json:"ship"`
}

func TestMatchers(t *testing.T) {
	payload := json.RawMessage(`{"id": 7, "items": ["a", "b"], "ship": {"city": "Oslo", "zip": "0150"}, "note": null}`)
	for _, c := range []struct {
		m    jobqtest.Matcher
		want bool
	}{
		{jobqtest.PartialJSON(`{"id":7}`), true},
		{jobqtest.PartialJSON(`{"id":7.0}`), true},
		{jobqtest.PartialJSON(`{"id":8}`), false},
		{jobqtest.PartialJSON(`{"ship":{"city":"Oslo"}}`), true},
		{jobqtest.PartialJSON(`{"ship":{"city":"Bergen"}}`), false},
		{jobqtest.PartialJSON(`{"ship":{"country":"NO"}}`), false},
		{jobqtest.PartialJSON(`{"items":["a","b"]}`), true},
		{jobqtest.PartialJSON(`{"items":["a"]}`), false}, // arrays compare whole
		{jobqtest.PartialJSON(`{"note":null}`), true},
		{jobqtest.PartialJSON(`{"missing":null}`), false},
		{jobqtest.PartialJSON(map[string]any{"id": 7}), true},
		{jobqtest.PartialJSON(`{}`), true},
		{jobqtest.PartialJSON(`"x"`), false},
		{jobqtest.EqualJSON(`{"id":7,"items":["a","b"],"ship":{"zip":"0150","city":"Oslo"},"note":null}`), true},
		{jobqtest.EqualJSON(`{"id":7}`), false},
		{jobqtest.PayloadFunc("id is odd", func(p json.RawMessage) bool {
			var o order
			return json.Unmarshal(p, &o) == nil && o.ID%2 == 1
		}), true},
	} {
		if got := c.m.MatchPayload(payload); got != c.want {
			t.Errorf("%s: matched %v, want %v", c.m, got, c.want)
		}
	}
	if jobqtest.PartialJSON(`{"id":7}`).MatchPayload(json.RawMessage(`not json`)) {
		t.Error("a payload that is not JSON matched")
	}
	defer func() {
		if recover() == nil {
			t.Error("PartialJSON of text that is not JSON did not panic")
		}
	}()
	jobqtest.PartialJSON(`{id: 7}`)
}

// TestAssertEnqueued: the assertions pass and fail on the right jobs, and a
// failure lists what was enqueued.
func TestAssertEnqueued(t *testing.T) {
	eachStoring(t, func(t *testing.T, b backend.Backend) {
		ctx := t.Context()
		rec := jobqtest.NewRecorder(b)
		client := rec.NewClient(t, jobq.ClientConfig{})
		var o order
		o.ID, o.Items = 7, []string{"a"}
		o.Ship.City = "Oslo"
		id, err := client.Enqueue(ctx, "ship", o, jobq.Queue("orders"), jobq.UniqueKey("order-7"))
		if err != nil {
			t.Fatal(err)
		}
		client.Enqueue(ctx, "ship", o, jobq.Queue("orders"), jobq.UniqueKey("order-7")) // duplicate: not enqueued
		if _, err := client.Enqueue(ctx, "email", map[string]string{"to": "ada@example.com"}); err != nil {
			t.Fatal(err)
		}

		if got := rec.AssertEnqueued(t, "ship", jobqtest.PartialJSON(`{"id":7,"ship":{"city":"Oslo"}}`)); got.ID != id || got.Queue != "orders" || got.UniqueKey != "order-7" {
			t.Fatalf("AssertEnqueued returned %+v", got)
		}
		if n := len(rec.Enqueued("ship")); n != 1 {
			t.Fatalf("Enqueued(ship) = %d jobs, want 1 (the duplicate is not enqueued)", n)
		}
		rec.AssertEnqueued(t, "email")
		rec.AssertNotEnqueued(t, "ship", jobqtest.PartialJSON(`{"id":8}`))
		rec.AssertNotEnqueued(t, "sms")

		msg := capture(t, func(tb testing.TB) { rec.AssertEnqueued(tb, "ship", jobqtest.PartialJSON(`{"id":8}`)) })
		for _, want := range []string{
			`no job of type "ship" with payload matching partial JSON {"id":8} was enqueued`,
			"enqueued (3):", `ship on queue orders {"id":7`, "stored as job", "duplicate of job", `email on queue default {"to":"ada@example.com"}`,
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("AssertEnqueued failure %q lacks %q", msg, want)
			}
		}
		msg = capture(t, func(tb testing.TB) { rec.AssertNotEnqueued(tb, "ship", jobqtest.PartialJSON(`{"id":7}`)) })
		if !strings.Contains(msg, `1 job(s) of type "ship" with payload matching partial JSON {"id":7} were enqueued, want none`) {
			t.Errorf("AssertNotEnqueued failure: %q", msg)
		}
		rec.Reset()
		msg = capture(t, func(tb testing.TB) { rec.AssertEnqueued(tb, "ship") })
		if !strings.Contains(msg, "nothing was enqueued") {
			t.Errorf("after Reset: %q", msg)
		}
	})
}
