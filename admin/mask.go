package admin

// masked returns a JSON payload or metadata object as the API and the
// dashboard show it (redact.Masker.JSON).
func (s *server) masked(raw []byte) []byte { return s.mask.JSON(raw) }

// maskedMeta returns metadata as the API and the dashboard show it.
func (s *server) maskedMeta(m map[string]string) map[string]string { return s.mask.Map(m) }

// maskedText returns an error message as the API and the dashboard show
// it: URL credentials masked.
func (s *server) maskedText(text string) string { return s.mask.Text(text) }
