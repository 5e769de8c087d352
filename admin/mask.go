package admin

import "github.com/jobq/jobq/internal/redact"

// masker is the server's Masker of Options.MaskKeys, made on first use.
func (s *server) masker() *redact.Masker {
	s.maskOnce.Do(func() { s.mask = redact.New(s.opts.MaskKeys) })
	return s.mask
}

// masked returns a JSON payload or metadata object as the API and the
// dashboard show it (redact.Masker.JSON).
func (s *server) masked(raw []byte) []byte { return s.masker().JSON(raw) }

// maskedMeta returns metadata as the API and the dashboard show it.
func (s *server) maskedMeta(m map[string]string) map[string]string { return s.masker().Map(m) }

// maskedText returns an error message as the API and the dashboard show
// it: URL credentials masked.
func (s *server) maskedText(text string) string { return s.masker().Text(text) }
