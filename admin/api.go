package admin

// registerAPI registers the /api/v1 routes.
func (s *server) registerAPI() {}
