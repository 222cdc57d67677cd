package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/testenv"
)

// These tests run the real program: in process through run(), and as a
// built binary for what needs separate processes (revocation by the CLI
// while serve runs, signals).

// cli runs one command in process and returns stdout, stderr and the exit code.
func cli(t *testing.T, db, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		if k == "AGENTAPI_DB" {
			return db
		}
		return ""
	}
	code := run(context.Background(), args, getenv, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

// mustCLI runs a command that must succeed and returns its stdout's first line.
func mustCLI(t *testing.T, db, stdin string, args ...string) string {
	t.Helper()
	out, errs, code := cli(t, db, stdin, args...)
	if code != 0 {
		t.Fatalf("agentapi %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
}

func TestOperatorCLI(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ops.db")
	acct, cred := operatorCLISeed(t, db)
	created := operatorCLIKeyJSON(t, db, acct)

	// key list: one JSON object per line, never a secret.
	operatorCLICheckKeyList(t, db, acct, cred, created.ID, created.Credential)

	operatorCLIChangeKeyAndAccount(t, db, acct, created.ID)

	// Refusals: non-zero exit, one line on stderr, nothing on stdout.
	other := mustCLI(t, db, "", "account", "create", "--name", "Other")
	mustCLI(t, db, "pass-word-2\n", "user", "create", "--account", other, "--email", "olga@example.com", "--role", "owner")
	for _, c := range []struct {
		name  string
		stdin string
		args  []string
	}{
		{"agent role", "", []string{"key", "create", "--account", acct, "--as", "bob@example.com", "--name", "x", "--preset", "full-access"}},
		{"owner of another account", "", []string{"key", "create", "--account", acct, "--as", "olga@example.com", "--name", "x", "--preset", "full-access"}},
		{"unknown user", "", []string{"key", "create", "--account", acct, "--as", "nobody@example.com", "--name", "x", "--preset", "full-access"}},
		{"revoke by agent role", "", []string{"key", "revoke", "--account", acct, "--as", "bob@example.com", created.ID}},
		{"revoke other account's key", "", []string{"key", "revoke", "--account", other, "--as", "olga@example.com", created.ID}},
		{"unknown preset", "", []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "x", "--preset", "root"}},
		{"unknown scope", "", []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "x", "--scopes", "aiagents:admin"}},
		{"preset and scopes", "", []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "x", "--preset", "full-access", "--scopes", "aiagents:read"}},
		{"past expiry", "", []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "x", "--preset", "full-access", "--expires-at", "2001-01-01T00:00:00Z"}},
		{"unknown agent", "", []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "x", "--preset", "full-access", "--agents", "agt_nope"}},
		{"bad env", "", []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "x", "--preset", "full-access", "--env", "prod"}},
		{"bad role", "pw-long-enough\n", []string{"user", "create", "--account", acct, "--email", "z@example.com", "--role", "boss"}},
		{"duplicate email", "pw-long-enough\n", []string{"user", "create", "--account", acct, "--email", "ANN@example.com", "--role", "admin"}},
		{"no password", "", []string{"user", "create", "--account", acct, "--email", "z@example.com", "--role", "admin"}},
		{"short password", "short\n", []string{"user", "create", "--account", acct, "--email", "z@example.com", "--role", "admin"}},
		{"bad email", "pw-long-enough\n", []string{"user", "create", "--account", acct, "--email", "not an email", "--role", "admin"}},
		{"unknown account", "", []string{"account", "deactivate", "acct_nope"}},
		{"unknown key", "", []string{"key", "set-rate-limit", "key_nope", "5"}},
		{"zero rate", "", []string{"key", "set-rate-limit", created.ID, "0"}},
		{"missing flag", "", []string{"account", "create"}},
		{"flags after args", "", []string{"key", "revoke", created.ID, "--account", acct, "--as", "ann@example.com"}},
		{"unknown command", "", []string{"frobnicate"}},
		{"unknown feature", "", []string{"account", "feature", "--enable", "teleport", acct}},
		{"no command", "", nil},
		{"bad flag value", "", []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "x", "--preset", "full-access", "--rate-limit", "abc"}},
		{"unknown flag", "", []string{"key", "set-rate-limit", "--bogus", created.ID, "5"}},
		{"flag given twice", "", []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "x", "--scopes", "aiagents:read", "--scopes", "aiagents:write"}},
		{"boolean flag given twice", "", []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "x", "--preset", "full-access", "--json", "--json"}},
		{"empty agents", "", []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "x", "--preset", "full-access", "--agents", ""}},
		{"blank agents", "", []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "x", "--preset", "full-access", "--agents", ","}},
		{"account name not text", "", []string{"account", "create", "--name", "bad\xffname"}},
		{"account name invisible", "", []string{"account", "create", "--name", "\u202e\u200b"}},
		{"key name invisible", "", []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "\u2066\u200d\u2069", "--preset", "full-access"}},
		{"credential for a key id", "", []string{"key", "revoke", "--account", acct, "--as", "ann@example.com", cred}},
		{"credential for a key id (set-rate-limit)", "", []string{"key", "set-rate-limit", cred, "5"}},
		{"credential for a command", "", []string{cred}},
		{"credential for a key subcommand", "", []string{"key", cred}},
		{"credential for an api subcommand", "", []string{"api", cred}},
	} {
		t.Run(c.name, func(t *testing.T) {
			operatorCLIRefused(t, db, cred, c.stdin, c.args)
		})
	}
	// Nothing was created by the refusals: still the keys from above.
	out, _, _ := cli(t, db, "", "key", "list", "--account", acct)
	if n := strings.Count(out, "\n"); n != 2 {
		t.Fatalf("%d keys after the refusals, want 2: %s", n, out)
	}
}

// operatorCLISeed creates the account Acme with an owner (ann), an agent
// (bob) and an admin (cy), and ann's aiagent-query key; it returns the
// account id and the key's credential.
func operatorCLISeed(t *testing.T, db string) (acct, cred string) {
	t.Helper()
	acct = mustCLI(t, db, "", "account", "create", "--name", "Acme")
	if !strings.HasPrefix(acct, "acct_") {
		t.Fatalf("account id %q", acct)
	}
	owner := mustCLI(t, db, "correct horse battery\n", "user", "create", "--account", acct, "--email", "ann@example.com", "--role", "owner")
	mustCLI(t, db, "another password\n", "user", "create", "--account", acct, "--email", "bob@example.com", "--role", "agent")
	mustCLI(t, db, "third password\n", "user", "create", "--account", acct, "--email", "cy@example.com", "--role", "admin")
	if !strings.HasPrefix(owner, "usr_") {
		t.Fatalf("user id %q", owner)
	}
	cred = mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "ann@example.com", "--name", "k1", "--preset", "aiagent-query")
	if !strings.HasPrefix(cred, "agk_live_") || len(cred) != len("agk_live_")+12+1+38 {
		t.Fatalf("credential %q", cred)
	}
	return acct, cred
}

// operatorCLIKeyJSON creates the test key k2 as cy (email in another
// case) with --json, and returns what it printed.
func operatorCLIKeyJSON(t *testing.T, db, acct string) (created struct{ ID, Prefix, Credential string }) {
	t.Helper()
	out, _, code := cli(t, db, "", "key", "create", "--account", acct, "--as", "CY@example.com", "--name", "k2",
		"--scopes", "aiagents:write,aiagents:read", "--env", "test", "--rate-limit", "5", "--expires-at", "2099-01-01T00:00:00Z", "--json")
	if code != 0 {
		t.Fatalf("key create --json: exit %d", code)
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || !strings.HasPrefix(created.Credential, "agk_test_"+created.Prefix+"_") {
		t.Fatalf("--json output %q (%v)", out, err)
	}
	return created
}

// operatorCLICheckKeyList: key list prints the two keys, one JSON object
// a line, k2 with its settings and never a secret.
func operatorCLICheckKeyList(t *testing.T, db, acct, cred, k2ID, k2Cred string) {
	t.Helper()
	out, _, _ := cli(t, db, "", "key", "list", "--account", acct)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Contains(out, cred) || strings.Contains(out, k2Cred) {
		t.Fatalf("key list: %q", out)
	}
	var k2 map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &k2); err != nil {
		t.Fatal(err)
	}
	if k2["id"] != k2ID || k2["rate_limit_per_minute"] != float64(5) || k2["expires_at"] != "2099-01-01T00:00:00.000Z" || k2["last_used_at"] != nil {
		t.Fatalf("key list line %v", k2)
	}
	for _, secretish := range []string{"hash", "secret", "credential"} {
		if _, ok := k2[secretish]; ok {
			t.Fatalf("key list shows %q", secretish)
		}
	}
}

// operatorCLIChangeKeyAndAccount sets k2's rate limit and revokes it,
// deactivates and activates the account, and turns a feature on and off;
// key list shows each change.
func operatorCLIChangeKeyAndAccount(t *testing.T, db, acct, k2ID string) {
	t.Helper()
	mustCLI(t, db, "", "key", "set-rate-limit", k2ID, "50")
	mustCLI(t, db, "", "key", "revoke", "--account", acct, "--as", "ann@example.com", k2ID)
	out, _, _ := cli(t, db, "", "key", "list", "--account", acct)
	if !strings.Contains(out, `"status":"revoked"`) || !strings.Contains(out, `"rate_limit_per_minute":50`) {
		t.Fatalf("after revoke and set-rate-limit: %s", out)
	}
	mustCLI(t, db, "", "account", "deactivate", acct)
	// Its keys are refused while it is deactivated: key list says so.
	if out, _, _ := cli(t, db, "", "key", "list", "--account", acct); strings.Count(out, `"account_active":false`) != 2 {
		t.Fatalf("key list of a deactivated account: %s", out)
	}
	mustCLI(t, db, "", "account", "activate", acct)
	if out, _, _ := cli(t, db, "", "key", "list", "--account", acct); strings.Count(out, `"account_active":true`) != 2 {
		t.Fatalf("key list of an active account: %s", out)
	}
	mustCLI(t, db, "", "account", "feature", "--enable", "ai-answers", acct)
	mustCLI(t, db, "", "account", "feature", "--disable", "ai-answers", acct)
}

// operatorCLIRefused: the command exits non-zero with nothing on stdout
// and one line on stderr that does not hold cred's secret.
func operatorCLIRefused(t *testing.T, db, cred, stdin string, args []string) {
	t.Helper()
	out, errs, code := cli(t, db, stdin, args...)
	if code == 0 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	// docs/operator-cli.md: exactly one line on stderr.
	if !strings.HasPrefix(errs, "agentapi: ") || !strings.HasSuffix(errs, "\n") || strings.Count(errs, "\n") != 1 || len(errs) < 15 {
		t.Fatalf("stderr is not one line: %q", errs)
	}
	if secret := cred[strings.LastIndexByte(cred, '_')+1:]; strings.Contains(errs, secret) {
		t.Fatalf("stderr holds the secret: %q", errs)
	}
}

// failingWriter is a stdout that cannot be written (a full disk, a closed
// pipe).
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// TestCreateWhoseOutputIsLost: a created key whose credential could not be
// written is revoked (nobody holds it); an account or user whose id could
// not be written is reported, not a silent success.
func TestCreateWhoseOutputIsLost(t *testing.T) {
	db := filepath.Join(t.TempDir(), "lost.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Acme")
	mustCLI(t, db, "correct horse battery\n", "user", "create", "--account", acct, "--email", "ann@example.com", "--role", "owner")
	lost := func(stdin string, args ...string) string {
		t.Helper()
		var errb bytes.Buffer
		getenv := func(k string) string {
			if k == "AGENTAPI_DB" {
				return db
			}
			return ""
		}
		if code := run(context.Background(), args, getenv, strings.NewReader(stdin), failingWriter{}, &errb); code != 1 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
		}
		return errb.String()
	}
	for _, json := range []bool{false, true} {
		args := []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", fmt.Sprint("lost ", json), "--preset", "full-access"}
		if json {
			args = append(args, "--json")
		}
		if errs := lost("", args...); !strings.Contains(errs, "was revoked, as nobody received it") {
			t.Fatalf("stderr %q", errs)
		}
	}
	out, _, _ := cli(t, db, "", "key", "list", "--account", acct)
	if strings.Count(out, `"status":"revoked"`) != 2 || strings.Contains(out, `"status":"active"`) {
		t.Fatalf("keys whose credential was lost: %s", out)
	}
	if errs := lost("", "account", "create", "--name", "Lost"); !strings.Contains(errs, "was created, but its id could not be written") {
		t.Fatalf("account create: %q", errs)
	}
	if errs := lost("another password\n", "user", "create", "--account", acct, "--email", "bo@example.com", "--role", "admin"); !strings.Contains(errs, "was created, but its id could not be written") {
		t.Fatalf("user create: %q", errs)
	}
}

// binPath is the program, built once per package run by TestMain before
// any test starts: go test's time-out (10 minutes by default) counts from
// the first test, and on a fresh machine (empty build cache) the build
// alone takes minutes, which used to land inside whichever test came first.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentapi-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "agentapi")
	if err := buildBinary(binPath); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildBinary builds the program as the test binary was built: with the
// race detector only under go test -race, so that the build reuses the
// packages go test compiled rather than compiling all of them again.
func buildBinary(out string) error {
	args := []string{"build", "-o", out}
	if raceEnabled() {
		args = append(args, "-race")
	}
	if b, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v: %s", err, b)
	}
	return nil
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// binary is the program TestMain built.
func binary(t *testing.T) string {
	t.Helper()
	return binPath
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// server is a running `agentapi serve` process.
type server struct {
	cmd    *exec.Cmd
	base   string
	stdout *syncBuf
	stderr *syncBuf
	done   chan error
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func startServer(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(binary(t), append([]string{"serve", "--addr", addr}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	s := &server{cmd: cmd, base: "http://" + addr, stdout: &syncBuf{}, stderr: &syncBuf{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-s.done
		// Whatever the test did, serve's output never holds a credential:
		// matched by form, so it covers keys minted anywhere (CLI, console).
		for name, out := range map[string]string{"log (stderr)": s.stderr.String(), "stdout": s.stdout.String()} {
			if m := testenv.CredentialShape.FindString(out); m != "" {
				t.Errorf("a credential (prefix %s) reached serve's %s", m[9:21], name)
			}
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", s.stderr.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not become healthy: %v\n%s", err, s.stderr.String())
		}
		select {
		case err := <-s.done:
			t.Fatalf("server exited: %v\n%s", err, s.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitReady polls base's /readyz until serve answers, run in process by
// the test; after 20 s it fails the test with logs().
func waitReady(t *testing.T, base string, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready: %s", logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitExit waits for serve, run in process by the test, to exit 0 after
// its context is cancelled; it fails the test with logs() otherwise.
func waitExit(t *testing.T, done <-chan int, logs func() string) {
	t.Helper()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, logs())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
}

func call(t *testing.T, method, url, key, body string) (int, map[string]any, http.Header) {
	t.Helper()
	return callWith(t, method, url, key, body, nil)
}

// callWith is call that also sends the header fields in extra.
func callWith(t *testing.T, method, url, key, body string, extra map[string]string) (int, map[string]any, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for name, v := range extra {
		req.Header.Set(name, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: body not JSON: %v", method, url, err)
	}
	return resp.StatusCode, out, resp.Header
}

func TestServeFirstRunRevocationAndGracefulStop(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "serve.db")
	s := startServer(t, nil, "--db", db)

	// First run: an account and its Owner exist, and the banner says how to go on.
	banner := firstRunBanner(t, s)
	acct, pw := firstRunAccountAndPassword(banner)
	if acct == "" || pw == "" {
		t.Fatalf("banner without account or password:\n%s", banner)
	}
	raw, _ := os.ReadFile(db)
	if bytes.Contains(raw, []byte(pw)) {
		t.Fatal("the one-time password is stored in plain text")
	}

	// The CLI, a separate process, creates a key while serve runs.
	k := firstRunKey(t, db, acct)
	firstRunUseKey(t, s.base, k.Credential)

	// A restart must not bootstrap again.
	// Revocation by another process takes effect on the very next request.
	cliProc(t, db, "key", "revoke", "--account", acct, "--as", "owner@localhost", k.ID)
	code, body, hdr := call(t, "GET", s.base+"/v1/me", k.Credential, "")
	if code != 401 || body["error"].(map[string]any)["code"] != "invalid_credentials" || hdr.Get("WWW-Authenticate") == "" {
		t.Fatalf("after revoke: %d %v", code, body)
	}

	// Account deactivation by another process, too.
	cred2 := firstRunDeactivation(t, s.base, db, acct)

	// SIGTERM: exit 0, and the pending last_used_at is flushed.
	firstRunStop(t, s)
	list := cliProc(t, db, "key", "list", "--account", acct)
	if strings.Count(list, `"last_used_at":null`) != 0 {
		t.Fatalf("last_used_at not flushed on shutdown:\n%s", list)
	}
	if strings.Contains(s.stderr.String(), k.Credential) || strings.Contains(s.stderr.String(), cred2) {
		t.Fatal("a credential reached the log")
	}

	// Restarting on the same database does not bootstrap again.
	s2 := startServer(t, nil, "--db", db)
	if strings.Contains(s2.stdout.String(), "Password:") {
		t.Fatal("second start bootstrapped again")
	}
}

// firstRunBanner waits up to 5 s for serve's first-run banner and checks
// that it names the console, the Owner, a password and the next command.
func firstRunBanner(t *testing.T, s *server) string {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(s.stdout.String(), "/v1/me") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	banner := s.stdout.String()
	for _, want := range []string{"/console/", "owner@localhost", "Password:", "agentapi key create"} {
		if !strings.Contains(banner, want) {
			t.Fatalf("first-run banner lacks %q:\n%s", want, banner)
		}
	}
	return banner
}

// firstRunAccountAndPassword reads the account id (after --account) and
// the one-time password (after Password:) from the banner.
func firstRunAccountAndPassword(banner string) (acct, pw string) {
	sc := bufio.NewScanner(strings.NewReader(banner))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "Password:" {
			pw = f[1]
		}
		for i, w := range f {
			if w == "--account" && i+1 < len(f) {
				acct = f[i+1]
			}
		}
	}
	return acct, pw
}

// firstRunKey creates the Owner's full-access key with the CLI as a
// separate process; its credential must match testenv.CredentialShape.
func firstRunKey(t *testing.T, db, acct string) (k struct{ ID, Credential string }) {
	t.Helper()
	cred := cliProc(t, db, "key", "create", "--account", acct, "--as", "owner@localhost", "--name", "First key", "--preset", "full-access", "--json")
	if err := json.Unmarshal([]byte(cred), &k); err != nil {
		t.Fatal(err)
	}
	if !testenv.CredentialShape.MatchString(k.Credential) {
		t.Fatal("testenv.CredentialShape does not match a real credential: the log check would be blind")
	}
	return k
}

// firstRunUseKey: the new key reads /v1/me (limit 120), creates an agent
// and lists it.
func firstRunUseKey(t *testing.T, base, cred string) {
	t.Helper()
	code, body, hdr := call(t, "GET", base+"/v1/me", cred, "")
	if code != 200 || hdr.Get("X-RateLimit-Limit") != "120" {
		t.Fatalf("GET /v1/me: %d %v", code, body)
	}
	code, _, hdr = call(t, "POST", base+"/v1/ai-agents", cred, `{"name":"Helper"}`)
	if code != 201 || hdr.Get("Location") == "" {
		t.Fatalf("create agent: %d", code)
	}
	code, body, _ = call(t, "GET", base+"/v1/ai-agents", cred, "")
	if code != 200 || len(body["data"].([]any)) != 1 {
		t.Fatalf("list: %d %v", code, body)
	}
}

// firstRunDeactivation creates a second key, and checks that it is
// refused while another process has the account deactivated and works
// again once it is activated. It returns the key's credential.
func firstRunDeactivation(t *testing.T, base, db, acct string) string {
	t.Helper()
	cred2 := cliProc(t, db, "key", "create", "--account", acct, "--as", "owner@localhost", "--name", "Second", "--preset", "aiagent-read")
	if code, _, _ := call(t, "GET", base+"/v1/me", cred2, ""); code != 200 {
		t.Fatalf("second key: %d", code)
	}
	cliProc(t, db, "account", "deactivate", acct)
	if code, _, _ := call(t, "GET", base+"/v1/me", cred2, ""); code != 401 {
		t.Fatalf("after deactivation: %d", code)
	}
	cliProc(t, db, "account", "activate", acct)
	if code, _, _ := call(t, "GET", base+"/v1/me", cred2, ""); code != 200 {
		t.Fatalf("after reactivation: %d", code)
	}
	return cred2
}

// firstRunStop sends serve SIGTERM and waits up to 30 s for exit 0.
func firstRunStop(t *testing.T, s *server) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, s.stderr.String())
		}
		s.done <- nil
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop after SIGTERM")
	}
}

func cliProc(t *testing.T, db string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = append(os.Environ(), "AGENTAPI_DB="+db)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("agentapi %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// TestServeInProcess runs serve through run() with an admin listener, and
// stops it by cancelling the context, as SIGTERM does.
func TestServeInProcess(t *testing.T) {
	db := filepath.Join(t.TempDir(), "inproc.db")
	addr, admin := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuf
	done := make(chan int, 1)
	go func() {
		getenv := func(k string) string {
			if k == "AGENTAPI_ADMIN_ADDR" {
				return admin
			}
			return ""
		}
		done <- run(ctx, []string{"serve", "--addr", addr, "--db", db}, getenv, strings.NewReader(""), &out, &errb)
	}()
	base := "http://" + addr
	waitReady(t, base, errb.String)
	if code, _, _ := call(t, "GET", base+"/v1/me", "", ""); code != 401 {
		t.Fatalf("anonymous /v1/me: %d", code)
	}
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`agentapi_http_requests_total{method="GET",route="GET /readyz",status="200"}`,
		`agentapi_auth_failures_total{reason="header"} 1`,
		"agentapi_http_request_duration_seconds_bucket",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if resp, err := http.Get(base + "/metrics"); err == nil {
		if resp.StatusCode != 404 {
			t.Errorf("/metrics on the API listener: %d", resp.StatusCode)
		}
		resp.Body.Close()
	}
	if resp, err := http.Get("http://" + admin + "/debug/pprof/"); err != nil || resp.StatusCode != 200 {
		t.Errorf("pprof on the admin listener: %v", err)
	} else {
		resp.Body.Close()
	}
	cancel()
	waitExit(t, done, errb.String)
	// Every log line is JSON; request lines carry the request id.
	for _, line := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if m["msg"] == "request" && m["request_id"] == nil {
			t.Fatalf("request line without request_id: %q", line)
		}
	}
}

func TestBannerNeverShowsADatabasePassword(t *testing.T) {
	for in, want := range map[string]string{
		"agentapi.db":                     "",
		"other.db":                        " --db other.db",
		"/tmp/my db.db":                   " --db '/tmp/my db.db'",
		"postgres://u:s3cret@h:5432/d":    ` --db "$AGENTAPI_DB"`,
		"postgres://u@h:5432/d?sslmode=x": " --db 'postgres://u@h:5432/d?sslmode=x'",
	} {
		if got := dbArg(in); got != want || strings.Contains(got, "s3cret") {
			t.Errorf("dbArg(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestServeWithRedisAwayLogsJSON: with Redis unreachable, serve answers from
// its in-process limiter, logs the outage once, and its stderr stays JSON
// lines: the Redis client's own messages, which it prints to the process's
// stderr, included (so this runs the binary).
func TestServeWithRedisAwayLogsJSON(t *testing.T) {
	db := filepath.Join(t.TempDir(), "noredis.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Acme")
	mustCLI(t, db, "correct horse battery\n", "user", "create", "--account", acct, "--email", "ann@example.com", "--role", "owner")
	cred := mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "ann@example.com", "--name", "k", "--preset", "aiagent-read")
	s := startServer(t, nil, "--db", db, "--redis", "redis://127.0.0.1:1/0")
	// Long enough for the probe to try Redis again, more than once.
	for deadline := time.Now().Add(2500 * time.Millisecond); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if code, _, h := call(t, "GET", s.base+"/v1/me", cred, ""); code != 200 || h.Get("X-RateLimit-Limit") == "" {
			t.Fatalf("/v1/me with Redis away: %d %v", code, h)
		}
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
		s.done <- err // for the cleanup
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}
	warnings := 0
	for _, line := range strings.Split(strings.TrimSpace(s.stderr.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		if strings.Contains(fmt.Sprint(m["msg"]), "redis unavailable") {
			warnings++
		}
	}
	if warnings != 1 {
		t.Fatalf("%d outage warnings, want 1:\n%s", warnings, s.stderr.String())
	}
}

// TestStopAnswersRequestsOnOpenConnections: a request that arrives on a
// keep-alive connection just after a stop began is answered (with
// Connection: close), not dropped with the idle connection; new
// connections are refused.
func TestStopAnswersRequestsOnOpenConnections(t *testing.T) {
	db := filepath.Join(t.TempDir(), "drain.db")
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuf
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr, "--db", db}, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
	}()
	waitReady(t, "http://"+addr, errb.String)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	get := func() *http.Response {
		t.Helper()
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := get(); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("before the stop: %d, close %v", resp.StatusCode, resp.Close)
	}
	cancel() // the connection is idle now
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err != nil {
			break // no longer accepting
		} else {
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections after the stop began")
		}
	}
	if resp := get(); resp.StatusCode != 200 || !resp.Close {
		t.Fatalf("on the open connection during the stop: %d, close %v", resp.StatusCode, resp.Close)
	}
	waitExit(t, done, errb.String)
}

// TestCreateIntoAClosedPipe: the real binary writing its credential into a
// pipe nobody reads any more fails with one line and revokes the key,
// instead of dying of SIGPIPE with the key left active.
func TestCreateIntoAClosedPipe(t *testing.T) {
	db := filepath.Join(t.TempDir(), "pipe.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Acme")
	mustCLI(t, db, "correct horse battery\n", "user", "create", "--account", acct, "--email", "ann@example.com", "--role", "owner")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader is gone before anything is written
	cmd := exec.Command(binary(t), "key", "create", "--db", db, "--account", acct, "--as", "ann@example.com", "--name", "piped", "--preset", "aiagent-read")
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &errb
	err = cmd.Run()
	w.Close()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v; stderr %q", err, errb.String())
	}
	if !strings.Contains(errb.String(), "was revoked, as nobody received it") || strings.Count(errb.String(), "\n") != 1 {
		t.Fatalf("stderr %q", errb.String())
	}
	out, _, _ := cli(t, db, "", "key", "list", "--account", acct)
	if !strings.Contains(out, `"status":"revoked"`) || strings.Contains(out, `"status":"active"`) {
		t.Fatalf("key after a closed pipe: %s", out)
	}
}
