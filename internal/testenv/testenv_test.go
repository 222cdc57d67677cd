package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeTB records Fatalf and Skipf instead of stopping the test, so the
// helpers' failure paths can be checked. Everything else goes to the real T.
type fakeTB struct {
	testing.TB
	fatal, skip string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	if f.fatal == "" {
		f.fatal = fmt.Sprintf(format, args...)
	}
}

func (f *fakeTB) Skipf(format string, args ...any) {
	if f.skip == "" {
		f.skip = fmt.Sprintf(format, args...)
	}
}

// stopped returns what the helper reported, or "" when it did not stop the
// test.
func (f *fakeTB) stopped() string { return f.fatal + f.skip }

func TestInCI(t *testing.T) {
	for _, tc := range []struct {
		val  string
		want bool
	}{
		{"", false},
		{"true", true},
		{"TRUE", true},
		{"1", true},
		{"false", false},
		{"0", false},
		{"yes", false},
	} {
		t.Setenv("CI", tc.val)
		if got := InCI(); got != tc.want {
			t.Errorf("CI=%q: InCI() = %v, want %v", tc.val, got, tc.want)
		}
	}
}

func TestRequire(t *testing.T) {
	for _, ci := range []string{"true", "1", "", "false"} {
		t.Setenv("CI", ci)
		f := &fakeTB{TB: t}
		Require(f, "redis", "connection refused")
		const want = "redis unavailable: connection refused"
		if InCI() {
			if f.fatal != want || f.skip != "" {
				t.Errorf("CI=%q: fatal=%q skip=%q, want fatal %q", ci, f.fatal, f.skip, want)
			}
		} else if f.skip != want || f.fatal != "" {
			t.Errorf("CI=%q: fatal=%q skip=%q, want skip %q", ci, f.fatal, f.skip, want)
		}
	}
}

// fakeRedis serves RESP on a loopback port, answering each command on a
// connection with reply(args), where reply = newConn() is made afresh for
// every connection. It returns the listener's address.
func fakeRedis(t *testing.T, newConn func() func(args []string) string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveRESP(c, newConn())
		}
	}()
	return ln.Addr().String()
}

func serveRESP(c net.Conn, reply func(args []string) string) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		args, err := readCommand(r)
		if err != nil {
			return
		}
		if _, err := io.WriteString(c, reply(args)+"\r\n"); err != nil {
			return
		}
	}
}

func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "*")))
	if err != nil {
		return nil, err
	}
	args := make([]string, 0, n)
	for range n {
		line, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$")))
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		args = append(args, string(buf[:size]))
	}
	return args, nil
}

// redisLike answers like a Redis server with 16 databases and, when
// password is not empty, requirepass set.
func redisLike(password string) func() func(args []string) string {
	return func() func(args []string) string {
		authed := password == ""
		return func(args []string) string {
			switch strings.ToUpper(args[0]) {
			case "AUTH":
				if args[len(args)-1] == password {
					authed = true
					return "+OK"
				}
				return "-WRONGPASS invalid username-password pair"
			}
			if !authed {
				return "-NOAUTH Authentication required."
			}
			switch strings.ToUpper(args[0]) {
			case "PING":
				return "+PONG"
			case "SELECT":
				if n, err := strconv.Atoi(args[1]); err == nil && n >= 0 && n < 16 {
					return "+OK"
				}
				return "-ERR DB index is out of range"
			}
			return "-ERR unknown command"
		}
	}
}

// always answers every command with reply.
func always(reply string) func() func([]string) string {
	return func() func([]string) string {
		return func([]string) string { return reply }
	}
}

func TestRedisURL(t *testing.T) {
	plain := fakeRedis(t, redisLike(""))
	secret := fakeRedis(t, redisLike("s3cret"))
	silent := fakeRedis(t, always("+OK")) // never PONGs

	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	for _, tc := range []struct {
		url     string
		ok      bool
		message string // part of the Require message when !ok
	}{
		{"redis://" + plain + "/15", true, ""},
		{"redis://" + plain, true, ""},
		{"redis://" + plain + "/0", true, ""},
		{"redis://" + plain + "/99", false, "DB index is out of range"},
		{"redis://:s3cret@" + secret + "/15", true, ""},
		{"redis://default:s3cret@" + secret + "/15", true, ""},
		{"redis://" + secret + "/15", false, "NOAUTH"},
		{"redis://:wrong@" + secret + "/15", false, "WRONGPASS"},
		{"redis://" + silent + "/15", false, `"+OK"`},
		{"redis://" + closed + "/15", false, "refused"},
	} {
		for _, ci := range []string{"", "true"} {
			t.Setenv("CI", ci)
			t.Setenv(EnvRedisURL, tc.url)
			f := &fakeTB{TB: t}
			got := RedisURL(f)
			switch {
			case tc.ok && (got != tc.url || f.stopped() != ""):
				t.Errorf("CI=%q %s: got %q, stopped with %q; want the URL back", ci, tc.url, got, f.stopped())
			case !tc.ok && got != "":
				t.Errorf("CI=%q %s: got %q, want \"\"", ci, tc.url, got)
			case !tc.ok && ci == "true" && (f.fatal == "" || f.skip != ""):
				t.Errorf("CI=%q %s: fatal=%q skip=%q, want a failure", ci, tc.url, f.fatal, f.skip)
			case !tc.ok && ci == "" && (f.skip == "" || f.fatal != ""):
				t.Errorf("CI=%q %s: fatal=%q skip=%q, want a skip", ci, tc.url, f.fatal, f.skip)
			case !tc.ok && (!strings.HasPrefix(f.stopped(), "redis unavailable: ") || !strings.Contains(f.stopped(), tc.message)):
				t.Errorf("CI=%q %s: message %q, want \"redis unavailable: ...%s...\"", ci, tc.url, f.stopped(), tc.message)
			}
			if strings.Contains(f.stopped(), "s3cret") || strings.Contains(f.stopped(), ":wrong@") {
				t.Errorf("%s: message leaks the password: %q", tc.url, f.stopped())
			}
		}
	}
}

func TestRedisURLTimeout(t *testing.T) {
	// A server that accepts and never answers must not hold the test for
	// longer than the dial timeout.
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	addr := fakeRedis(t, func() func([]string) string {
		return func([]string) string { <-done; return "+PONG" }
	})
	t.Setenv("CI", "")
	t.Setenv(EnvRedisURL, "redis://"+addr+"/15")
	f := &fakeTB{TB: t}
	start := time.Now()
	if got := RedisURL(f); got != "" || f.skip == "" {
		t.Fatalf("got %q, skip %q; want a skip", got, f.skip)
	}
	if d := time.Since(start); d > 3*dialTimeout {
		t.Errorf("RedisURL took %v, want about %v", d, dialTimeout)
	}
}

func TestRedisURLMalformed(t *testing.T) {
	for _, raw := range []string{
		"http://127.0.0.1:6379/15",
		"redis:///15",
		"redis://127.0.0.1:6379/x",
		"redis://[::1",
	} {
		// A malformed URL is a configuration mistake: it fails even outside CI.
		t.Setenv("CI", "")
		t.Setenv(EnvRedisURL, raw)
		f := &fakeTB{TB: t}
		if got := RedisURL(f); got != "" || f.fatal == "" || f.skip != "" {
			t.Errorf("%s: got %q, fatal %q, skip %q; want a failure", raw, got, f.fatal, f.skip)
		}
	}
}

func TestRedisURLDefault(t *testing.T) {
	t.Setenv("CI", "")
	t.Setenv(EnvRedisURL, "")
	f := &fakeTB{TB: t}
	got := RedisURL(f)
	if f.stopped() == "" {
		if got != DefaultRedisURL {
			t.Errorf("got %q, want %q", got, DefaultRedisURL)
		}
	} else if !strings.Contains(f.stopped(), "127.0.0.1:6379/15") {
		t.Errorf("message %q does not name the default URL", f.stopped())
	}
}

// executable creates an executable file called name in dir.
func executable(t *testing.T, dir, name string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestChromium(t *testing.T) {
	dir := t.TempDir()
	explicit := executable(t, dir, "my-chromium")
	notExec := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExec, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	pathDir := t.TempDir()
	inPath := executable(t, pathDir, "chromium-browser")
	emptyDir := t.TempDir()

	for _, tc := range []struct {
		name, env, path string
		want            string // "" when the helper must stop the test
	}{
		{"explicit", explicit, emptyDir, explicit},
		{"explicit wins over PATH", explicit, pathDir, explicit},
		{"explicit missing", filepath.Join(dir, "nope"), pathDir, ""},
		{"explicit not executable", notExec, pathDir, ""},
		{"from PATH", "", pathDir, inPath},
		{"none", "", emptyDir, ""},
	} {
		for _, ci := range []string{"", "true"} {
			t.Setenv("CI", ci)
			t.Setenv(EnvChromium, tc.env)
			t.Setenv("PATH", tc.path)
			f := &fakeTB{TB: t}
			got := Chromium(f)
			if got != tc.want {
				t.Errorf("%s, CI=%q: got %q, want %q", tc.name, ci, got, tc.want)
			}
			switch {
			case tc.want != "" && f.stopped() != "":
				t.Errorf("%s, CI=%q: stopped with %q", tc.name, ci, f.stopped())
			case tc.want == "" && ci == "true" && f.fatal == "":
				t.Errorf("%s, CI=%q: did not fail", tc.name, ci)
			case tc.want == "" && ci == "" && f.skip == "":
				t.Errorf("%s, CI=%q: did not skip", tc.name, ci)
			case tc.want == "" && !strings.HasPrefix(f.stopped(), "chromium unavailable: "):
				t.Errorf("%s, CI=%q: message %q", tc.name, ci, f.stopped())
			}
		}
	}
}

// The tests below use the real environment: in CI they check that .ci/run
// provided the services; elsewhere they skip when a service is missing.

func TestServiceRedis(t *testing.T) {
	url := RedisURL(t)
	t.Logf("redis at %s", url)
}

func TestServiceChromium(t *testing.T) {
	path := Chromium(t)
	t.Logf("chromium at %s", path)
}
