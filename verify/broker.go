package verify

import (
	"context"
	"fmt"

	"github.com/jobq/jobq/internal/localserver"
)

// privateBroker is a Redis or PostgreSQL server that verify started in a
// temporary directory on a free port, so that the restart fault can kill
// it and start it again on the same data.
type privateBroker struct {
	kind  string // "redis" or "postgres"
	url   string
	redis *localserver.Redis
	pg    *localserver.Postgres
}

// startBroker starts a private server of kind.
func startBroker(ctx context.Context, kind string) (*privateBroker, error) {
	b := &privateBroker{kind: kind}
	var err error
	switch kind {
	case "redis":
		// appendfsync always: every acknowledged write is on disk before
		// the reply, so a kill loses nothing acknowledged (see the
		// table of Redis persistence in docs/backends.md).
		b.redis, err = localserver.NewRedis("--appendonly", "yes", "--appendfsync", "always")
		if err == nil {
			b.redis.SysProcAttr = procAttr()
			b.url = b.redis.URL
		}
	case "postgres":
		// Durable as a production server is: a restart after an
		// immediate stop must keep every commit.
		b.pg, err = localserver.NewPostgres([]string{"max_connections=500"})
		if err == nil {
			b.url = b.pg.URL
		}
	default:
		err = fmt.Errorf("unknown kind")
	}
	if err == nil {
		err = b.start(ctx)
	}
	if err != nil {
		b.close()
		return nil, fmt.Errorf("verify: private %s (or give --db a server of your own): %w", kind, err)
	}
	return b, nil
}

// start starts the (stopped) server and returns once it answers.
func (b *privateBroker) start(ctx context.Context) error {
	if b.pg != nil {
		return b.pg.Start()
	}
	return b.redis.Start(ctx)
}

// kill stops the server as a crash would: SIGKILL for Redis, an immediate
// stop (no checkpoint; recovery runs at the next start) for PostgreSQL.
func (b *privateBroker) kill() error {
	if b.pg != nil {
		return b.pg.Stop("immediate")
	}
	b.redis.Kill()
	return nil
}

// close kills the server and removes its directory.
func (b *privateBroker) close() {
	if b.pg != nil {
		b.pg.Close()
	}
	if b.redis != nil {
		b.redis.Close()
	}
}
