package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jobq/jobq"

	"github.com/jobq/jobq/internal/redact"
)

// TestMaskedErrors: a URL's password in a job's error is masked in the
// API's and the dashboard's answers, and stored as it was.
func TestMaskedErrors(t *testing.T) {
	const errText = "POST https://bot:hunter2@hooks.example.com/x?token=tok9: 503"
	b := openSQLite(t)
	failJobs(t, b, "q", 1, `{}`, errText)
	e := newEnvOn(t, b, Options{})
	srv, insp := dashServer(t, b)
	fj, err := insp.FailedPage(t.Context(), jobq.FailedFilter{}, 1, 0)
	if err != nil || len(fj) != 1 || fj[0].Error != errText {
		t.Fatalf("stored failed job %+v, %v; want its error as written", fj, err)
	}
	id := fj[0].ID
	pages := map[string]string{
		"API list":           string(e.do(req{path: "/api/v1/failed"}).raw),
		"API detail":         string(e.do(req{path: fmt.Sprintf("/api/v1/failed/%d", id)}).raw),
		"dashboard list":     func() string { _, body := get(t, srv, "/failed"); return body }(),
		"dashboard job page": func() string { _, body := get(t, srv, fmt.Sprintf("/failed/%d", id)); return body }(),
	}
	for name, body := range pages {
		if strings.Contains(body, "hunter2") || strings.Contains(body, "tok9") || !strings.Contains(body, "hooks.example.com") {
			t.Errorf("%s shows %.300s", name, body)
		}
	}
}

func FuzzMasked(f *testing.F) {
	for _, s := range []string{`{"password":"x"}`, `[{"a":{"token":[1,2]}}]`, `{`, `"x"`, `1e400`, "{\"\\ud800\":1}"} {
		f.Add([]byte(s))
	}
	s := &server{mask: redact.New(DefaultMaskKeys)}
	f.Fuzz(func(t *testing.T, in []byte) {
		out := s.masked(in)
		if json.Valid(in) && !json.Valid(out) { // a document too deep to mask is shown as a JSON string
			t.Fatalf("valid %q masked to invalid %q", in, out)
		}
	})
}

// TestMaskedInAPI: payload and metadata keys are masked in every answer
// that shows a job, and stored unmasked.
func TestMaskedInAPI(t *testing.T) {
	e := newEnvOn(t, memoryBackend(t), Options{MaskKeys: []string{"password", "authorization"}})
	payload := `{"user":"u","auth":{"Password":"hunter2"},"list":[{"password":"x"}]}`
	r := e.do(req{method: "POST", path: "/api/v1/jobs", body: `{"type":"login","payload":` + payload + `,"metadata":{"Authorization":"Bearer abc","trace":"t1"},"max_attempts":1}`})
	e.want(r, http.StatusCreated, "")
	id := r.num("id")
	row, err := e.b.JobGet(context.Background(), id)
	if err != nil || !strings.Contains(string(row.Payload), "hunter2") || row.Metadata["Authorization"] != "Bearer abc" {
		t.Fatalf("the stored job must keep its values: %+v %v", row, err)
	}
	for _, path := range []string{fmt.Sprintf("/api/v1/jobs/%d", id), "/api/v1/jobs"} {
		got := e.do(req{path: path})
		if strings.Contains(string(got.raw), "hunter2") || strings.Contains(string(got.raw), "Bearer abc") || !strings.Contains(string(got.raw), `"t1"`) {
			t.Errorf("GET %s shows %s", path, got.raw)
		}
	}
	e.failQueued("default", 1)
	fl := e.do(req{path: "/api/v1/failed"})
	if strings.Contains(string(fl.raw), "hunter2") || strings.Contains(string(fl.raw), "Bearer abc") || !strings.Contains(string(fl.raw), "login") {
		t.Errorf("failed list shows %s", fl.raw)
	}
	var list struct {
		Failed []struct {
			ID int64 `json:"id"`
		} `json:"failed"`
	}
	if err := json.Unmarshal(fl.raw, &list); err != nil || len(list.Failed) != 1 {
		t.Fatalf("failed list %s: %v", fl.raw, err)
	}
	one := e.do(req{path: fmt.Sprintf("/api/v1/failed/%d", list.Failed[0].ID)})
	if strings.Contains(string(one.raw), "hunter2") || !strings.Contains(string(one.raw), `"***"`) {
		t.Errorf("failed detail shows %s", one.raw)
	}
}
