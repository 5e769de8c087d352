package localserver

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
)

// Postgres is a private PostgreSQL server made by initdb in a directory of
// its own. As root, PostgreSQL's programs run as the postgres user, since
// the server refuses to run as root.
type Postgres struct {
	// URL connects to the server's "postgres" database as the superuser
	// postgres (trust authentication, 127.0.0.1 only).
	URL  string
	Port int
	Dir  string // holds data/, the socket and the log

	bin      string // PostgreSQL's bin directory
	asPG     bool
	settings []string
}

// NewPostgres initialises a server that Start then starts. settings are
// -c name=value pairs added to the server's command line (say fsync=off
// for tests, where a restart must keep what was committed but an OS crash
// need not); initArgs are added to initdb's. The binaries are those of the
// newest PostgreSQL in /usr/lib/postgresql/*/bin, or on PATH.
func NewPostgres(settings []string, initArgs ...string) (*Postgres, error) {
	bin, err := PostgresBin()
	if err != nil {
		return nil, err
	}
	p := &Postgres{bin: bin, asPG: os.Geteuid() == 0, settings: settings}
	if p.Dir, err = os.MkdirTemp("", "jobq-postgres-"); err != nil {
		return nil, fmt.Errorf("private postgres: %w", err)
	}
	if err := p.init(initArgs); err != nil {
		_ = os.RemoveAll(p.Dir)
		return nil, fmt.Errorf("private postgres: %w", err)
	}
	return p, nil
}

func (p *Postgres) init(initArgs []string) error {
	if p.asPG {
		if err := chownToPostgres(p.Dir); err != nil {
			return err
		}
	}
	var err error
	if p.Port, err = FreePort(); err != nil {
		return fmt.Errorf("free port: %w", err)
	}
	p.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.Port)
	args := append([]string{"-D", p.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8"}, initArgs...)
	if out, err := p.run("initdb", args...); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

func (p *Postgres) data() string { return filepath.Join(p.Dir, "data") }
func (p *Postgres) log() string  { return filepath.Join(p.Dir, "log") }

// Start starts the (stopped) server and returns once it accepts
// connections.
func (p *Postgres) Start() error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", p.Port, p.Dir)
	for _, s := range p.settings {
		opts += " -c " + s
	}
	out, err := p.run("pg_ctl", "-D", p.data(), "-o", opts, "-l", p.log(), "-w",
		"-t", strconv.Itoa(int(StartTimeout.Seconds())), "start")
	if err != nil {
		return errorf(logTail(p.log()), "start postgres on port %d: %v\n%s", p.Port, err, out)
	}
	return nil
}

// Stop stops the server: mode "fast" disconnects clients and shuts down
// cleanly, "immediate" stops it as a crash would (recovery runs at the
// next Start). A server that is not running is left alone.
func (p *Postgres) Stop(mode string) error {
	if _, err := os.Stat(filepath.Join(p.data(), "postmaster.pid")); err != nil {
		return nil
	}
	if out, err := p.run("pg_ctl", "-D", p.data(), "-m", mode, "-w", "-t", "60", "stop"); err != nil {
		return fmt.Errorf("stop postgres (%s): %w\n%s", mode, err, out)
	}
	return nil
}

// Close stops the server at once and removes its directory.
func (p *Postgres) Close() {
	_ = p.Stop("immediate")
	_ = os.RemoveAll(p.Dir)
}

// run runs one of PostgreSQL's programs, as the postgres user when we are
// root.
func (p *Postgres) run(name string, args ...string) ([]byte, error) {
	path := filepath.Join(p.bin, name)
	var cmd *exec.Cmd
	if p.asPG {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = p.Dir
	return cmd.CombinedOutput()
}

// PostgresBin returns the bin directory of the newest installed
// PostgreSQL.
func PostgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(binDir string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
		return v
	}
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	p, err := exec.LookPath("pg_ctl")
	if err != nil {
		return "", fmt.Errorf("no PostgreSQL server binaries (pg_ctl) in /usr/lib/postgresql/*/bin nor on PATH")
	}
	return filepath.Dir(p), nil
}

// chownToPostgres hands dir to the postgres user.
func chownToPostgres(dir string) error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root needs a postgres user to run PostgreSQL as: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}
