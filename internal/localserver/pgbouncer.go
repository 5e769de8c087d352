package localserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// PgBouncer is a private PgBouncer in transaction pooling mode, in a
// directory of its own on a free port, in front of a PostgreSQL server:
// what the Postgres backend's tests run through to prove it keeps no
// session state. As root it runs as the postgres user, since PgBouncer
// refuses to run as root.
type PgBouncer struct {
	Port int
	Dir  string // holds the configuration, the user list and the log

	cmd  *exec.Cmd
	done chan struct{}
}

// PgBouncerBin is the pgbouncer program on PATH, or Debian's
// /usr/sbin/pgbouncer, which root's PATH has but others' may not.
func PgBouncerBin() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	const debian = "/usr/sbin/pgbouncer"
	if _, err := os.Stat(debian); err == nil {
		return debian, nil
	}
	return "", fmt.Errorf("no pgbouncer on PATH nor at /usr/sbin/pgbouncer (Debian package pgbouncer)")
}

// StartPgBouncer starts a PgBouncer that pools transactions of user (who
// logs in without a password: the server must trust it) to every
// database of the server at host:port, and returns once it accepts
// connections.
func StartPgBouncer(host string, port int, user string) (*PgBouncer, error) {
	bin, err := PgBouncerBin()
	if err != nil {
		return nil, err
	}
	p := &PgBouncer{done: make(chan struct{})}
	if p.Port, err = FreePort(); err != nil {
		return nil, fmt.Errorf("private pgbouncer: free port: %w", err)
	}
	if p.Dir, err = os.MkdirTemp("", "jobq-pgbouncer-"); err != nil {
		return nil, fmt.Errorf("private pgbouncer: %w", err)
	}
	// max_client_conn above the tests' pools together; default_pool_size
	// a tenth of a default server's max_connections (100), which the
	// other packages' tests use at the same time: clients wait in the
	// pooler, as they do in production, rather than being refused.
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 2000
default_pool_size = 10
ignore_startup_parameters = extra_float_digits
`, host, port, p.Port, filepath.Join(p.Dir, "users.txt"))
	if err := os.WriteFile(filepath.Join(p.Dir, "users.txt"), []byte(strconv.Quote(user)+` ""`+"\n"), 0o644); err != nil {
		return nil, p.fail(err)
	}
	if err := os.WriteFile(filepath.Join(p.Dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
		return nil, p.fail(err)
	}
	args := []string{filepath.Join(p.Dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "postgres"}, args...)
	}
	// The log is a file Go opens, so that PgBouncer, once it is the
	// postgres user, need not be able to open it.
	log, err := os.Create(p.log())
	if err != nil {
		return nil, p.fail(err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	err = p.cmd.Start()
	_ = log.Close()
	if err != nil {
		return nil, p.fail(err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	for {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)))
		if err == nil {
			_ = c.Close()
			return p, nil
		}
		select {
		case <-p.done:
			log := logTail(p.log())
			p.Close()
			return nil, errorf(log, "private pgbouncer on port %d exited at start", p.Port)
		case <-ctx.Done():
			log := logTail(p.log())
			p.Close()
			return nil, errorf(log, "private pgbouncer on port %d: not up after %s", p.Port, StartTimeout)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (p *PgBouncer) log() string { return filepath.Join(p.Dir, "log") }

// fail removes the directory of a PgBouncer that did not start.
func (p *PgBouncer) fail(err error) error {
	_ = os.RemoveAll(p.Dir)
	return fmt.Errorf("private pgbouncer: %w", err)
}

// Close stops PgBouncer at once, dropping its connections (SIGTERM; its
// SIGINT is a safe shutdown, which waits for every client to finish),
// and removes its directory.
func (p *PgBouncer) Close() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	_ = os.RemoveAll(p.Dir)
}
