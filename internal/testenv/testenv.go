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
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	raw := cmp.Or(strings.TrimSpace(os.Getenv(EnvRedisURL)), DefaultRedisURL)
	opts, err := redis.ParseURL(raw)
	u, _ := url.Parse(raw)
	if err == nil && u.Host == "" && u.Scheme != "unix" {
		// go-redis would quietly dial localhost instead.
		err = errors.New("missing host")
	}
	if err != nil {
		t.Fatalf("%s: %v", EnvRedisURL, err)
		return ""
	}
	// Connect as opts say (AUTH, SELECT) and PING, within dialTimeout and
	// without retrying.
	opts.MaxRetries, opts.DialerRetries = -1, 1
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = dialTimeout, dialTimeout, dialTimeout
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	c := redis.NewClient(opts)
	defer c.Close()
	pong, err := c.Ping(ctx).Result()
	if err == nil && pong != "PONG" {
		err = fmt.Errorf("unexpected reply %q", pong)
	}
	if err != nil {
		Require(t, "redis", fmt.Sprintf("%s: %v (set %s)", u.Redacted(), err, EnvRedisURL))
		return ""
	}
	return raw
}

// Chromium returns the path of a Chromium (or Chrome) binary:
// AGENTAPI_TEST_CHROMIUM when set, else the first of chromiumNames found
// in PATH. When there is none, the test fails in CI and is skipped
// elsewhere (see Require).
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
