package redis

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jobq/jobq/backend"
)

// URL query parameters Open accepts (see the package documentation).
const (
	paramKeyPrefix = "key_prefix"
	paramCluster   = "cluster"
	paramAddr      = "addr"
	paramTimeout   = "timeout"
	paramPoolSize  = "pool_size"
)

var acceptedParams = strings.Join([]string{paramKeyPrefix, paramCluster, paramAddr, paramTimeout, paramPoolSize}, ", ")

// DefaultKeyPrefix is the key prefix when neither Options.KeyPrefix nor
// the URL names one.
const DefaultKeyPrefix = "jobq"

// MaxKeyPrefixLen bounds Options.KeyPrefix.
const MaxKeyPrefixLen = 64

// urlSettings is what a redis:// or rediss:// URL says.
type urlSettings struct {
	client    clientConfig
	keyPrefix string        // "" when the URL names none
	timeout   time.Duration // 0 when the URL names none
	poolSize  int           // 0 when the URL names none
}

// parseURL reads a redis:// or rediss:// URL:
//
//	redis[s]://[[user]:password@]host[:port][/db][?key_prefix=…&timeout=…&pool_size=…]
//	redis[s]://host:port?cluster=true&addr=host2:port&addr=host3:port
//
// Errors wrap backend.ErrInvalidInput and never show the password.
func parseURL(raw string) (urlSettings, error) {
	var s urlSettings
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the URL, password and all.
		return s, urlError(raw, "it does not parse as a URL")
	}
	switch strings.ToLower(u.Scheme) {
	case "redis":
	case "rediss":
		// No ServerName: the TLS dial takes each node's own host name,
		// which is what a cluster's nodes need.
		s.client.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	default:
		return s, urlError(raw, "the scheme must be redis:// or rediss:// (TLS)")
	}
	if u.Opaque != "" {
		return s, urlError(raw, "write redis://host:port, with the two slashes")
	}
	addr, err := hostPort(u.Host)
	if err != nil {
		return s, urlError(raw, err.Error())
	}
	s.client.addrs = []string{addr}
	if u.User != nil {
		s.client.username = u.User.Username()
		s.client.password, _ = u.User.Password()
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || n < 0 {
			return s, urlError(raw, fmt.Sprintf("the path %q must be a database number, e.g. /0", u.Path))
		}
		s.client.db = n
	}
	values, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return s, urlError(raw, "bad query: "+err.Error())
	}
	var extra []string
	for key, vs := range values {
		v := vs[len(vs)-1]
		switch key {
		case paramKeyPrefix:
			if err := validateKeyPrefix(v); err != nil {
				return s, err
			}
			s.keyPrefix = v
		case paramCluster:
			b, err := strconv.ParseBool(v)
			if err != nil {
				return s, urlError(raw, fmt.Sprintf("%s=%q: use true or false", paramCluster, v))
			}
			s.client.cluster = b
		case paramAddr:
			for _, a := range vs {
				hp, err := hostPort(a)
				if err != nil {
					return s, urlError(raw, fmt.Sprintf("%s=%q: %v", paramAddr, a, err))
				}
				extra = append(extra, hp)
			}
		case paramTimeout:
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return s, urlError(raw, fmt.Sprintf("%s=%q: use a positive Go duration such as 5s", paramTimeout, v))
			}
			s.timeout = d
		case paramPoolSize:
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 10000 {
				return s, urlError(raw, fmt.Sprintf("%s=%q: use a number of connections from 1 to 10000", paramPoolSize, v))
			}
			s.poolSize = n
		default:
			return s, urlError(raw, fmt.Sprintf("unknown parameter %q; accepted: %s", key, acceptedParams))
		}
	}
	if len(extra) > 0 && !s.client.cluster {
		return s, urlError(raw, fmt.Sprintf("%s names more nodes of a cluster: add %s=true", paramAddr, paramCluster))
	}
	if s.client.cluster && s.client.db != 0 {
		return s, urlError(raw, "a Redis Cluster has only database 0")
	}
	s.client.addrs = append(s.client.addrs, extra...)
	return s, nil
}

// hostPort completes a host with Redis's default port.
func hostPort(h string) (string, error) {
	if h == "" {
		return "localhost:6379", nil
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port (or a bare IPv6 address in brackets).
		host = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		if host == "" || strings.ContainsAny(host, "[]/") {
			return "", fmt.Errorf("%q is not a host[:port]", h)
		}
		return net.JoinHostPort(host, "6379"), nil
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	if host == "" {
		host = "localhost"
	}
	return net.JoinHostPort(host, port), nil
}

// validateKeyPrefix checks a key prefix: 1 to 64 letters, digits, '_',
// '-', '.' or ':'. Braces would change the keys' Cluster hash tags.
func validateKeyPrefix(p string) error {
	ok := p != "" && len(p) <= MaxKeyPrefixLen
	for i := 0; ok && i < len(p); i++ {
		c := p[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':'
	}
	if !ok {
		return &backend.InputError{Field: "key prefix", Reason: fmt.Sprintf("%q: use 1 to %d letters, digits, '_', '-', '.' or ':'", p, MaxKeyPrefixLen)}
	}
	return nil
}

func urlError(raw, reason string) error {
	return &backend.InputError{Field: "backend URL", Reason: fmt.Sprintf("%s: %s", backend.RedactURL(raw), reason)}
}
