package admin

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq"
)

// web holds the dashboard's templates and static assets: no build step,
// the binary carries them.
//
//go:embed web
var web embed.FS

// dashboard is the state the dashboard's pages share: parsed templates,
// the counts cache and the throughput history.
type dashboard struct {
	s       *server
	pages   map[string]*template.Template
	counts  *countsCache
	version string // cache-busting suffix of asset URLs
	// flashKey signs the flash messages of redirects (see flashSig).
	flashKey [32]byte
}

// registerDashboard registers the dashboard's pages and assets.
func (s *server) registerDashboard() { s.dash = s.newDashboard() }

// newDashboard registers the dashboard on s and returns it (tests reach
// its counts cache through it).
func (s *server) newDashboard() *dashboard {
	d := &dashboard{
		s:       s,
		pages:   parsePages(),
		counts:  newCountsCache(s.opts.Inspector, time.Now),
		version: assetVersion(),
	}
	_, _ = rand.Read(d.flashKey[:])
	if ctx := s.opts.Sample; ctx != nil {
		go d.counts.sampleUntil(ctx, s.log)
	}
	static, err := fs.Sub(web, "web/static")
	if err != nil {
		panic(fmt.Sprintf("admin: embedded assets: %v", err)) // the embed pattern guarantees the folder
	}
	// The login page and its assets are public: behind handle they would
	// redirect to the login page itself.
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", cacheAssets(http.FileServerFS(static))))
	s.mux.HandleFunc("GET /login", d.login)

	s.handle("GET /{$}", ScopeRead, d.overview)
	s.handle("GET /overview.json", ScopeRead, d.overviewJSON)
	s.handle("GET /queues", ScopeRead, d.queues)
	s.handle("GET /queues/{queue}", ScopeRead, d.queueJobs)
	s.handle("GET /jobs/{id}", ScopeRead, d.job)
	s.handle("GET /failed", ScopeRead, d.failedList)
	s.handle("GET /failed/{id}", ScopeRead, d.failedJob)
	s.handle("GET /schedules", ScopeRead, d.schedules)

	// State changes are form POSTs; the server's CrossOriginProtection,
	// in front of every route, refuses cross-site ones (see New).
	s.handle("POST /failed/replay", ScopeAdmin, d.post(d.bulkReplay))
	s.handle("POST /failed/purge", ScopeAdmin, d.post(d.bulkPurge))
	s.handle("POST /failed/{id}/replay", ScopeAdmin, d.post(d.replayOne))
	s.handle("POST /failed/{id}/purge", ScopeAdmin, d.post(d.purgeOne))
	s.handle("POST /queues/{queue}/pause", ScopeAdmin, d.post(d.pause))
	s.handle("POST /queues/{queue}/resume", ScopeAdmin, d.post(d.resume))
	s.handle("POST /jobs/{id}/cancel", ScopeAdmin, d.post(d.cancel))
	d.registerWorkflows()
	d.registerKeys()
	return d
}

// post wraps a state-changing handler: the form is parsed (within the
// body limit the server applies to every request).
func (d *dashboard) post(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			d.fail(w, r, http.StatusBadRequest, "Bad form", "The form could not be read; nothing was changed.")
			return
		}
		h(w, r)
	}
}

// cacheAssets lets browsers keep the assets: their URLs carry the
// build's version.
func cacheAssets(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=86400")
		h.ServeHTTP(w, r)
	})
}

// assetVersion is a short digest of the embedded assets, so a new build's
// CSS and JS are not hidden by a browser's cache.
func assetVersion() string {
	var sum uint32 = 2166136261
	_ = fs.WalkDir(web, "web/static", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := web.ReadFile(p)
		if err != nil {
			return err
		}
		for _, c := range b {
			sum = (sum ^ uint32(c)) * 16777619
		}
		return nil
	})
	return strconv.FormatUint(uint64(sum), 36)
}

// pageNames are the templates under web/templates, each rendered inside
// layout.html.
var pageNames = []string{"overview", "queues", "jobs", "job", "failed", "failed_job", "schedules", "workflows", "workflow", "keys", "key", "login", "message"}

// parsePages parses every page with the layout; a broken template is a
// build defect, caught by any test that renders a page.
func parsePages() map[string]*template.Template {
	layout := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(web, "web/templates/layout.html"))
	pages := make(map[string]*template.Template, len(pageNames))
	for _, n := range pageNames {
		pages[n] = template.Must(template.Must(layout.Clone()).ParseFS(web, "web/templates/"+n+".html"))
	}
	return pages
}

// page is what every template receives: the layout's fields and the
// page's own data.
type page struct {
	Prefix  string
	Version string
	Title   string
	Nav     string // the highlighted navigation entry
	Flash   string // the outcome of the last action, from the redirect
	Data    any
}

// render writes a page; a template error after the first byte cannot
// change the status any more, so pages render into a buffer first.
func (d *dashboard) render(w http.ResponseWriter, r *http.Request, status int, name, title, nav string, data any) {
	var buf bytes.Buffer
	p := page{Prefix: d.s.opts.Prefix, Version: d.version, Title: title, Nav: nav, Flash: d.flashOf(r), Data: data}
	if err := d.pages[name].ExecuteTemplate(&buf, "layout.html", p); err != nil {
		d.s.log.Error("admin: render dashboard page", "page", name, "err", err)
		http.Error(w, "render page: internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders a message page with status.
func (d *dashboard) fail(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	d.render(w, r, status, "message", title, "", msg)
}

// failErr renders an inspector error: not found is 404, bad input 400,
// an unsupported operation 501, anything else 500 (logged, not shown:
// a backend error may name hosts and paths).
func (d *dashboard) failErr(w http.ResponseWriter, r *http.Request, doing string, err error) {
	switch {
	case errors.Is(err, jobq.ErrNotFound):
		d.fail(w, r, http.StatusNotFound, "Not found", doing+": not found.")
	case errors.Is(err, jobq.ErrInvalidInput):
		d.fail(w, r, http.StatusBadRequest, "Bad input", doing+": "+err.Error())
	case errors.Is(err, jobq.ErrNotSupported):
		d.fail(w, r, http.StatusNotImplemented, "Not supported", doing+": this backend does not support it.")
	default:
		d.s.log.Error("admin: dashboard", "doing", doing, "err", err)
		d.fail(w, r, http.StatusInternalServerError, "Error", doing+": the backend failed; see the server's log.")
	}
}

// redirect sends the browser to a dashboard path (without the prefix)
// with a flash message saying what was done.
func (d *dashboard) redirect(w http.ResponseWriter, r *http.Request, path string, q url.Values, flash string) {
	if q == nil {
		q = url.Values{}
	}
	if flash != "" {
		q.Set("flash", flash)
		q.Set("fs", d.flashSig(flash))
	}
	u := d.s.opts.Prefix + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	http.Redirect(w, r, u, http.StatusSeeOther)
}

// flashSig signs a flash message with the process's key: the message
// rides in the redirect's URL, and a link that anyone can write must not
// make the dashboard say what they like ("your session expired, log in at
// …").
func (d *dashboard) flashSig(msg string) string {
	m := hmac.New(sha256.New, d.flashKey[:])
	m.Write([]byte(msg))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// flashOf is the request's flash message when this process signed it,
// else nothing.
func (d *dashboard) flashOf(r *http.Request) string {
	q := r.URL.Query()
	msg := q.Get("flash")
	if msg == "" || !hmac.Equal([]byte(q.Get("fs")), []byte(d.flashSig(msg))) {
		return ""
	}
	return msg
}

// pretty renders a JSON document masked and indented for reading; what is
// not JSON is shown as it is (as text, by the template).
func (d *dashboard) pretty(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	m := d.s.masked(raw)
	var buf bytes.Buffer
	if err := json.Indent(&buf, m, "", "  "); err != nil {
		return string(m)
	}
	return buf.String()
}

// metadata renders a job's metadata masked, as sorted key/value rows.
func (d *dashboard) metadata(md map[string]string) []kv {
	out := make([]kv, 0, len(md))
	for k, v := range d.s.maskedMeta(md) {
		out = append(out, kv{k, v})
	}
	slices.SortFunc(out, func(a, b kv) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// kv is one metadata row.
type kv struct{ Key, Value string }

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"num":   fmtNum,
	"time":  fmtTime,
	"ago":   fmtAgo,
	"iso":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"query": func(v url.Values) string { return v.Encode() },
	"pathq": url.PathEscape,
	"lower": strings.ToLower,
	// keyrules is a queue's key rules in a few words, "" for none.
	"keyrules": keyRulesText,
}

// fmtNum writes n with thousands separators: counts are read at a glance.
func fmtNum(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// fmtTime is a time in UTC to the second, or a dash.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// fmtAgo is how long ago (or how far ahead) t is, roughly.
func fmtAgo(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	suffix := " ago"
	if d < 0 {
		d, suffix = -d, " from now"
	}
	switch {
	case d < time.Second:
		return "now"
	case d < time.Minute:
		return fmt.Sprintf("%ds%s", int(d.Seconds()), suffix)
	case d < time.Hour:
		return fmt.Sprintf("%dm%s", int(d.Minutes()), suffix)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%s", int(d.Hours()), suffix)
	}
	return fmt.Sprintf("%dd%s", int(d.Hours()/24), suffix)
}
