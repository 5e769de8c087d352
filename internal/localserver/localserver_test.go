package localserver

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// unavailable skips a test whose server binaries are missing, or fails it
// under CI=true, where they are part of the machine.
func unavailable(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(err)
	}
	t.Skip(err)
}

// redisDo sends one command in Redis's inline protocol and returns the
// reply's first line.
func redisDo(t *testing.T, port int, cmd string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(line)
}

// TestRedisKillKeepsAOF: a server with appendfsync always keeps an
// acknowledged write through a SIGKILL, and Start brings it back on the
// same port; Close removes its directory.
func TestRedisKillKeepsAOF(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		unavailable(t, err)
	}
	r, err := NewRedis("--appendonly", "yes", "--appendfsync", "always")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := redisDo(t, r.Port, "SET k kept"); got != "+OK" {
		t.Fatalf("SET: %q", got)
	}
	r.Kill()
	if err := redisPing(context.Background(), r.Port); err == nil {
		t.Fatal("the server answers after Kill")
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := redisDo(t, r.Port, "GET k"); got != "$4" {
		t.Fatalf("GET after the kill: %q, want the 4-byte value", got)
	}
	r.Close()
	if _, err := os.Stat(r.Dir); !os.IsNotExist(err) {
		t.Fatalf("directory %s after Close: %v", r.Dir, err)
	}
}

// TestPostgresImmediateStop: a committed row survives an immediate stop
// (a crash, recovered at the next Start).
func TestPostgresImmediateStop(t *testing.T) {
	if _, err := PostgresBin(); err != nil {
		unavailable(t, err)
	}
	p, err := NewPostgres(nil, "--no-sync")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	query := func(sql string) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, p.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var n int
		if err := conn.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE t AS SELECT 7 AS n`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if err := p.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if n := query(`SELECT n FROM t`); n != 7 {
		t.Fatalf("row after an immediate stop: %d, want 7", n)
	}
}
