package anchor

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// RedisDB is where a memory program keeps its jobs: a logical database of
// its own, since Asynq's key names are fixed and the program empties the
// whole database before and after its run.
type RedisDB struct {
	Addr string // host:port
	DB   int
}

// ParseRedisURL reads redis://host:port/db (any query is left to the
// caller). Database 0 is refused: it is where applications and other runs
// keep their keys, and FLUSHDB would take them.
func ParseRedisURL(raw string) (RedisDB, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "redis" || u.Host == "" {
		return RedisDB{}, fmt.Errorf("redis URL %q: want redis://host:port/db", raw)
	}
	db, err := strconv.Atoi(strings.Trim(u.Path, "/"))
	if err != nil || db <= 0 {
		return RedisDB{}, fmt.Errorf("redis URL %q: name a logical database other than 0 (it is flushed before and after the run)", raw)
	}
	return RedisDB{Addr: u.Host, DB: db}, nil
}

// Flush empties the database with FLUSHDB. It speaks RESP over a plain
// connection rather than through a client library, so that neither memory
// program carries a library the other does not for it.
func (r RedisDB) Flush() error {
	conn, err := net.DialTimeout("tcp", r.Addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("flush redis db %d: %w", r.DB, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	db := strconv.Itoa(r.DB)
	cmd := fmt.Sprintf("*2\r\n$6\r\nSELECT\r\n$%d\r\n%s\r\n*1\r\n$7\r\nFLUSHDB\r\n", len(db), db)
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return fmt.Errorf("flush redis db %d: %w", r.DB, err)
	}
	rd := bufio.NewReader(conn)
	for range 2 {
		line, err := rd.ReadString('\n')
		if err != nil {
			return fmt.Errorf("flush redis db %d: %w", r.DB, err)
		}
		if !strings.HasPrefix(line, "+OK") {
			return fmt.Errorf("flush redis db %d: redis said %q", r.DB, strings.TrimSpace(line))
		}
	}
	return nil
}
