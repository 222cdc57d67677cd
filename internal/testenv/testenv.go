// Package testenv gives tests one rule for outside services (Redis,
// Chromium, ...): a test that needs a service it cannot find fails when
// the environment variable CI is "true" (or "1") and is skipped, with the
// reason, everywhere else. CI thereby never passes by silently skipping,
// while a developer without the service can still run the rest.
//
// The environment variables read are:
//
//	CI                       "true" or "1" on the CI runner
//	AGENTAPI_TEST_REDIS_URL  redis://host:port/db (default redis://127.0.0.1:6379/15)
//	AGENTAPI_TEST_CHROMIUM   path to a chromium binary (default: search PATH)
//
// PostgreSQL helpers live in internal/store/storetest.
package testenv

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Environment variables read by this package.
const (
	EnvRedisURL = "AGENTAPI_TEST_REDIS_URL"
	EnvChromium = "AGENTAPI_TEST_CHROMIUM"
)

// DefaultRedisURL is used when AGENTAPI_TEST_REDIS_URL is unset or empty.
const DefaultRedisURL = "redis://127.0.0.1:6379/15"

// dialTimeout bounds the whole Redis probe: connect, optional AUTH/SELECT,
// and PING.
const dialTimeout = time.Second

// chromiumNames are searched in PATH, in order, when AGENTAPI_TEST_CHROMIUM
// is unset.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// InCI reports whether the tests run on the CI runner (env CI is "true" or
// "1"), where a missing service is an error rather than a reason to skip.
func InCI() bool {
	v := strings.TrimSpace(os.Getenv("CI"))
	return strings.EqualFold(v, "true") || v == "1"
}

// Require reports that service is unavailable, for the given reason: it
// fails the test in CI (see InCI) and skips it elsewhere. The message is
// "<service> unavailable: <reason>" in both cases.
func Require(t testing.TB, service, reason string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s unavailable: %s", service, reason)
		return
	}
	t.Skipf("%s unavailable: %s", service, reason)
}

// RedisURL returns the URL of the Redis database the tests may use
// (AGENTAPI_TEST_REDIS_URL, default DefaultRedisURL) after checking, within
// one second, that it answers PING. When it does not, the test fails in CI
// and is skipped elsewhere (see Require). A malformed URL always fails the
// test: it is a configuration mistake, not a missing service.
//
// The database may hold data from earlier tests; tests should use their
// own key prefixes.
func RedisURL(t testing.TB) string {
	t.Helper()
	raw := strings.TrimSpace(os.Getenv(EnvRedisURL))
	if raw == "" {
		raw = DefaultRedisURL
	}
	u, err := parseRedisURL(raw)
	if err != nil {
		t.Fatalf("%s: %v", EnvRedisURL, err)
		return ""
	}
	if err := pingRedis(u, dialTimeout); err != nil {
		Require(t, "redis", fmt.Sprintf("%s: %v (set %s)", u.Redacted(), err, EnvRedisURL))
		return ""
	}
	return raw
}

// Chromium returns the path of a Chromium (or Chrome) binary:
// AGENTAPI_TEST_CHROMIUM when set, else the first of chromium,
// chromium-browser, google-chrome, google-chrome-stable found in PATH.
// When there is none, the test fails in CI and is skipped elsewhere (see
// Require).
func Chromium(t testing.TB) string {
	t.Helper()
	if p := strings.TrimSpace(os.Getenv(EnvChromium)); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			Require(t, "chromium", fmt.Sprintf("%s=%q: %v", EnvChromium, p, err))
			return ""
		}
		return path
	}
	for _, name := range chromiumNames {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	Require(t, "chromium", fmt.Sprintf("none of %s found in PATH (set %s)",
		strings.Join(chromiumNames, ", "), EnvChromium))
	return ""
}

// parseRedisURL checks a redis://, rediss:// or unix:// URL in the form the
// go-redis client accepts.
func parseRedisURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid URL: %w", err)
	}
	switch u.Scheme {
	case "redis", "rediss":
		if u.Host == "" {
			return nil, fmt.Errorf("%s: missing host", u.Redacted())
		}
		if db := strings.Trim(u.Path, "/"); db != "" {
			if n, err := strconv.Atoi(db); err != nil || n < 0 {
				return nil, fmt.Errorf("%s: database %q is not a number", u.Redacted(), db)
			}
		}
	case "unix":
		if u.Path == "" {
			return nil, fmt.Errorf("%s: missing socket path", u.Redacted())
		}
		if db := u.Query().Get("db"); db != "" {
			if n, err := strconv.Atoi(db); err != nil || n < 0 {
				return nil, fmt.Errorf("%s: database %q is not a number", u.Redacted(), db)
			}
		}
	default:
		return nil, fmt.Errorf("%s: scheme must be redis, rediss or unix", u.Redacted())
	}
	return u, nil
}

// pingRedis connects to u and sends AUTH (when u has a password), SELECT
// (when u names a database other than 0) and PING as raw RESP commands,
// all within timeout.
func pingRedis(u *url.URL, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()

	var (
		conn net.Conn
		err  error
		db   string
	)
	switch u.Scheme {
	case "unix":
		conn, err = (&net.Dialer{}).DialContext(ctx, "unix", u.Path)
		db = u.Query().Get("db")
	default:
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "6379")
		}
		if u.Scheme == "rediss" {
			d := &tls.Dialer{Config: &tls.Config{ServerName: u.Hostname()}}
			conn, err = d.DialContext(ctx, "tcp", addr)
		} else {
			conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}
		db = strings.Trim(u.Path, "/")
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	r := bufio.NewReader(conn)

	if pw, ok := u.User.Password(); ok {
		args := []string{"AUTH", pw}
		if name := u.User.Username(); name != "" {
			args = []string{"AUTH", name, pw}
		}
		if err := command(conn, r, "+OK", args...); err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
	}
	if db != "" && db != "0" {
		if err := command(conn, r, "+OK", "SELECT", db); err != nil {
			return fmt.Errorf("SELECT %s: %w", db, err)
		}
	}
	if err := command(conn, r, "+PONG", "PING"); err != nil {
		return fmt.Errorf("PING: %w", err)
	}
	return nil
}

// command writes args as a RESP array of bulk strings and checks that the
// one-line reply is want.
func command(w net.Conn, r *bufio.Reader, want string, args ...string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := w.Write([]byte(b.String())); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case line == want:
		return nil
	case strings.HasPrefix(line, "-"):
		return errors.New(strings.TrimPrefix(line, "-"))
	default:
		return fmt.Errorf("unexpected reply %q", line)
	}
}
