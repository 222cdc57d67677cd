package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/secretscan"
	"github.com/agentapi/agentapi/internal/secretscan/secretscantest"
	"github.com/agentapi/agentapi/internal/store/storetest"
	"github.com/agentapi/agentapi/internal/testenv"
)

// postReport sends a signed leak report to base and returns the status and
// the raw answer.
func postReport(t *testing.T, base string, body []byte, s secretscantest.Signer) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/secret-scanning/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(secretscan.HeaderKeyID, s.ID)
	req.Header.Set(secretscan.HeaderSignature, s.Sign(t, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// TestLeakReportAcrossInstances: two serve processes on one PostgreSQL and
// one Redis, one given the keys file by flag and the other by environment.
// A report to one revokes the key for the other's very next request; a
// serve without the flag answers 404; a bad keys file stops serve at start.
func TestLeakReportAcrossInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three servers")
	}
	db := storetest.PostgresURL(t)
	redisURL := testenv.RedisURL(t)
	gh := secretscantest.NewSigner(t, "gh-1")
	keysFile := filepath.Join(t.TempDir(), "github-keys.json")
	secretscantest.WriteKeys(t, keysFile, 0, gh)
	a := startServer(t, nil, "--db", db, "--redis", redisURL, "--secret-scanning-keys", keysFile)
	b := startServer(t, []string{"AGENTAPI_SECRET_SCANNING_KEYS=" + keysFile}, "--db", db, "--redis", redisURL)
	off := startServer(t, nil, "--db", db, "--redis", redisURL)

	acct := mustCLI(t, db, "", "account", "create", "--name", "Leaky")
	mustCLI(t, db, "long enough password\n", "user", "create", "--account", acct, "--email", "leaky@example.com", "--role", "owner")
	var k struct{ ID, Credential string }
	if err := json.Unmarshal([]byte(mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "leaky@example.com",
		"--name", "pushed", "--preset", "full-access", "--json")), &k); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*server{a, b, a, b} {
		if code, body, _ := call(t, "GET", s.base+"/v1/me", k.Credential, ""); code != 200 {
			t.Fatalf("before the report: %d %v", code, body)
		}
	}
	report := secretscantest.Report(t, secretscan.Entry{Token: k.Credential, Type: "agentapi_api_key",
		URL: "https://github.com/octo/leak/blob/main/config.py", Source: "content"})

	code, body := postReport(t, off.base, report, gh)
	if code != 404 || !strings.Contains(string(body), `"not_found"`) {
		t.Fatalf("serve without --secret-scanning-keys: %d %s", code, body)
	}
	code, body = postReport(t, a.base, report, gh)
	want := `[{"token_hash":"` + secretscan.TokenHash(k.Credential) + `","token_type":"agentapi_api_key","label":"true_positive"}]`
	if code != 200 || strings.TrimSpace(string(body)) != want {
		t.Fatalf("report: %d %s, want 200 %s", code, body, want)
	}
	for _, s := range []*server{b, a, off} {
		if code, body, _ := call(t, "GET", s.base+"/v1/me", k.Credential, ""); code != 401 {
			t.Fatalf("after the report, %s: %d %v", s.base, code, body)
		}
	}
	// Replayed to the other instance (its keys from the environment): the
	// same answer, nothing new.
	if code, body = postReport(t, b.base, report, gh); code != 200 || strings.TrimSpace(string(body)) != want {
		t.Fatalf("replay: %d %s", code, body)
	}
}

// TestServeRefusesABadKeysFile: a keys file that does not load stops serve
// at start with a usage error naming the flag.
func TestServeRefusesABadKeysFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(bad, []byte(`{"public_keys":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{bad, filepath.Join(t.TempDir(), "absent.json")} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "x.db"),
			"--secret-scanning-keys", path}, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
		if code == 0 || !strings.Contains(errb.String(), "--secret-scanning-keys") {
			t.Fatalf("serve with %s: exit %d, stderr %q", path, code, errb.String())
		}
	}
}

// TestServeReloadsKeysOnHangup: SIGHUP makes serve re-read its keys file
// at once, even a rewrite in place that kept the file's size and
// modification time (which the check on every report cannot see), and
// serve keeps running (SIGHUP used to end it).
func TestServeReloadsKeysOnHangup(t *testing.T) {
	old, cur := secretscantest.NewSigner(t, "gh-1"), secretscantest.NewSigner(t, "gh-2")
	keysFile := filepath.Join(t.TempDir(), "github-keys.json")
	secretscantest.WriteKeys(t, keysFile, -time.Hour, old)
	before, err := os.Stat(keysFile)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, nil, "--db", filepath.Join(t.TempDir(), "hup.db"), "--secret-scanning-keys", keysFile)
	report := secretscantest.Report(t)
	if code, body := postReport(t, s.base, report, old); code != 200 {
		t.Fatalf("before: %d %s", code, body)
	}
	secretscantest.WriteKeys(t, keysFile, 0, cur) // the same size
	if err := os.Chtimes(keysFile, before.ModTime(), before.ModTime()); err != nil {
		t.Fatal(err)
	}
	if code, body := postReport(t, s.base, report, cur); code != 401 {
		t.Fatalf("the new key before SIGHUP (the file looks unchanged): %d %s", code, body)
	}
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := postReport(t, s.base, report, cur)
		if code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new key 10 s after SIGHUP: %d %s", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := postReport(t, s.base, report, old); code != 401 {
		t.Fatalf("the removed key after SIGHUP: %d %s", code, body)
	}
}
