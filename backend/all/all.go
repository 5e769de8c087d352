// Package all registers every backend that ships with jobq, so that
// backend.Open understands all their URL schemes. Import it for its side
// effect: import _ "github.com/jobq/jobq/backend/all".
package all

import (
	_ "github.com/jobq/jobq/backend/inline"   // sync:
	_ "github.com/jobq/jobq/backend/memory"   // memory:
	_ "github.com/jobq/jobq/backend/postgres" // postgres://, postgresql://
	_ "github.com/jobq/jobq/backend/redis"    // redis://, rediss://
	_ "github.com/jobq/jobq/backend/sqlite"   // sqlite:PATH
)
