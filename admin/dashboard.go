package admin

// registerDashboard registers the dashboard's pages and assets.
func (s *server) registerDashboard() {}
