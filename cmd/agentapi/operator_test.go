package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// docs/operator-cli.md: operator commands other than serve and
// account create refuse a --db file that does not exist, naming it, and
// create nothing.
func TestOperatorCommandsRefuseAMissingDatabaseFile(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "ops.db")
	acct, created := opsKey(t, db)

	// A mistyped path, and a credential pasted where the path belongs.
	cred := "agk_live_5ts8z4savksb_5u2RTsZFSM6ipt9BKVlbjS6yjfebgUCn2pYN8M"
	for _, missing := range []string{filepath.Join(dir, "opps.db"), filepath.Join(dir, cred)} {
		for _, c := range []struct {
			stdin string
			args  []string
		}{
			{"", []string{"account", "show", acct}},
			{"", []string{"account", "deactivate", acct}},
			{"", []string{"account", "activate", acct}},
			{"", []string{"account", "feature", "--enable", "ai-answers", acct}},
			{"", []string{"account", "rename", acct, "Globex"}},
			{"a long passphrase\n", []string{"user", "create", "--account", acct, "--email", "bob@example.com", "--role", "admin"}},
			{"", []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "k2", "--preset", "aiagent-read"}},
			{"", []string{"key", "revoke", "--account", acct, "--as", "ann@example.com", created.ID}},
			{"", []string{"key", "set-rate-limit", created.ID, "5"}},
			{"", []string{"key", "list", "--account", acct}},
			{"", []string{"key", "show", created.ID}},
			{"", []string{"user", "list", "--account", acct}},
		} {
			name := strings.Join(c.args[:2], " ")
			t.Run(name, func(t *testing.T) {
				refuseMissingDBBothWays(t, missing, cred, name, c.stdin, c.args)
			})
		}
	}
	// account create still makes a new database.
	fresh := filepath.Join(dir, "fresh.db")
	mustCLI(t, fresh, "", "account", "create", "--name", "New")
	if _, err := os.Stat(fresh); err != nil {
		t.Fatalf("account create: %v", err)
	}
}

// refuseMissingDBBothWays runs cmdArgs naming the missing database through
// --db, then through AGENTAPI_DB: each time exit 1, stderr names the file
// (redacted) on one line, and the file is not created.
func refuseMissingDBBothWays(t *testing.T, missing, cred, name, stdin string, cmdArgs []string) {
	t.Helper()
	// Through --db, and through AGENTAPI_DB.
	for _, args := range [][]string{
		append([]string{cmdArgs[0], cmdArgs[1], "--db", missing}, cmdArgs[2:]...),
		cmdArgs,
	} {
		refuseMissingDBOnce(t, missing, cred, name, stdin, args)
	}
}

func refuseMissingDBOnce(t *testing.T, missing, cred, name, stdin string, args []string) {
	t.Helper()
	out, errs, code := cli(t, missing, stdin, args...)
	want := "agentapi: no database file " + credential.RedactText(`"`+missing+`"`)
	if code != 1 || out != "" || !strings.HasPrefix(errs, want) || strings.Count(errs, "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errs, want)
	}
	if strings.Contains(errs, cred[22:]) {
		t.Fatalf("stderr holds the secret: %q", errs)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s created %s (%v)", name, missing, err)
	}
}

// A PostgreSQL URL is not a file: the check leaves it to the store.
func TestOperatorCommandsTakeAPostgresURL(t *testing.T) {
	db := storetest.PostgresURL(t)
	acct := mustCLI(t, db, "", "account", "create", "--name", "Acme")
	out := mustCLI(t, db, "", "account", "show", acct)
	if !strings.Contains(out, `"id":"`+acct+`"`) {
		t.Fatalf("account show: %s", out)
	}
}

func TestAccountShow(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ops.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Acme")
	show := func() map[string]any {
		t.Helper()
		out, errs, code := cli(t, db, "", "account", "show", acct)
		if code != 0 || errs != "" || strings.Count(out, "\n") != 1 {
			t.Fatalf("account show: exit %d, stdout %q, stderr %q", code, out, errs)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("account show printed %q: %v", out, err)
		}
		return m
	}
	m := show()
	if m["id"] != acct || m["name"] != "Acme" || m["active"] != true || !serverTime(m["created_at"]) || len(m) != 5 {
		t.Fatalf("account show: %v", m)
	}
	if f, ok := m["features"].([]any); !ok || len(f) != 0 {
		t.Fatalf("features of a new account: %#v, want []", m["features"])
	}
	mustCLI(t, db, "", "account", "feature", "--enable", "ai-answers", acct)
	mustCLI(t, db, "", "account", "deactivate", acct)
	m = show()
	if f, _ := m["features"].([]any); len(f) != 1 || f[0] != "ai-answers" || m["active"] != false {
		t.Fatalf("after enable and deactivate: %v", m)
	}
	for _, args := range [][]string{{"account", "show", "acct_nope"}, {"account", "show"}, {"account", "show", acct, acct}} {
		out, errs, code := cli(t, db, "", args...)
		if code == 0 || out != "" || !strings.HasPrefix(errs, "agentapi: ") || strings.Count(errs, "\n") != 1 {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
}

// Setting a key's rate limit to the value it has changes nothing and leaves
// no audit event ("5 → 5" was recorded).
func TestSetRateLimitToTheSameValueIsNotAudited(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ops.db")
	acct, k := opsKey(t, db)
	for _, n := range []string{"5", "5", "120", "120"} {
		mustCLI(t, db, "", "key", "set-rate-limit", k.ID, n)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.ListKeyAuditEvents(ctx, acct, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, e := range evs {
		if e.Action == "rate_limit_changed" {
			details = append(details, e.Detail)
		}
	}
	if len(details) != 2 || details[0] != "5 → 120 requests a minute" || details[1] != "120 → 5 requests a minute" {
		t.Fatalf("rate limit events %q, want the two changes only", details)
	}
}

// The redaction of credentials in what the CLI prints keeps the CLI's own
// words about the format.
func TestRedactionKeepsTheCredentialFormat(t *testing.T) {
	cred := "agk_live_5ts8z4savksb_5u2RTsZFSM6ipt9BKVlbjS6yjfebgUCn2pYN8M"
	for in, want := range map[string]string{
		"not of the form agk_<env>_<prefix>_<secret> (check)": "not of the form agk_<env>_<prefix>_<secret> (check)",
		"your API key (agk_…); it is":                         "your API key (agk_…); it is",
		"ends in agk_":                                        "ends in agk_",
		"no key " + cred + " here":                            "no key agk_live_5ts8z4savksb_… here",
		"no key agk_live_5ts8z4sav":                           "no key agk_[redacted]",
		"no key " + strings.ToUpper(cred) + " here":           "no key agk_live_5ts8z4savksb_… here", // one redaction (credential.Redact), in any case
		"both agk_<env> and \"" + cred + "\"":                 "both agk_<env> and \"agk_live_5ts8z4savksb_…\"",
	} {
		if got := credential.RedactText(in); got != want {
			t.Errorf("credential.RedactText(%q) = %q, want %q", in, got, want)
		}
	}
	// The messages themselves, as printed.
	for _, c := range []struct{ key, want string }{
		{"hello", "agentapi: api me: the API key is not of the form agk_<env>_<prefix>_<secret> (check that it was copied whole); see \"agentapi api me --help\"\n"},
		{"", "agentapi: api me: set AGENTAPI_KEY to your API key (agk_…); it is read only from the environment; see \"agentapi api me --help\"\n"},
	} {
		if _, errs, _ := apiCLI(t, c.key, "http://127.0.0.1:1/v1", "", "me"); errs != c.want {
			t.Errorf("AGENTAPI_KEY=%q: stderr %q, want %q", c.key, errs, c.want)
		}
	}
}

// docs/operator-cli.md: a failure is exactly one line on stderr, also when
// --redis does not answer: the real binary, as go-redis's own logger
// writes to the process's stderr, not to run's.
func TestOperatorUnreachableRedisOneLine(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ops.db")
	_, created := opsKey(t, db)
	cmd := exec.Command(binary(t), "key", "set-rate-limit", "--db", db, "--redis", "redis://"+freeAddr(t), created.ID, "600")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v; stderr %q", err, errb.String())
	}
	if !strings.HasPrefix(errb.String(), "agentapi: ") || strings.Count(errb.String(), "\n") != 1 {
		t.Fatalf("stderr is not one line: %q", errb.String())
	}
}

// A --db that cannot be agentapi's database is one plain line naming it,
// not the driver's error, and another program's file is left as it was.
func TestOperatorRefusesADatabaseItCannotUse(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("not a database, but long enough to be read as a header by SQLite\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	st, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Exec(`CREATE TABLE t (x INTEGER)`)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	nodir := filepath.Join(dir, "nodir", "x.db")
	for _, c := range []struct {
		db, want string
		args     []string
	}{
		{nodir, nodir + ": its directory does not exist", []string{"account", "create", "--name", "Acme"}},
		{text, text + " is not a SQLite database", []string{"account", "list"}},
		{other, other + " is not an agentapi database (it has tables of its own, and no schema_migrations)", []string{"account", "list"}},
		{other, other + " is not an agentapi database (it has tables of its own, and no schema_migrations)", []string{"account", "create", "--name", "Acme"}},
	} {
		out, errs, code := cli(t, c.db, "", c.args...)
		if code != 1 || out != "" || !strings.HasSuffix(errs, c.want+"\n") || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v on %s: exit %d, %q %q; want %q", c.args, c.db, code, out, errs, c.want)
		}
	}
	if _, err := os.Stat(filepath.Dir(nodir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the missing directory: %v", err)
	}
}

// opsKey makes, through the CLI, an account of db with an Owner
// (ann@example.com) and one aiagent-read key; it returns the account id
// and the key (its id).
func opsKey(t *testing.T, db string) (acct string, key struct{ ID string }) {
	t.Helper()
	acct = mustCLI(t, db, "", "account", "create", "--name", "Acme")
	mustCLI(t, db, "a long passphrase\n", "user", "create", "--account", acct, "--email", "ann@example.com", "--role", "owner")
	if err := json.Unmarshal([]byte(mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "ann@example.com", "--name", "k", "--preset", "aiagent-read", "--json")), &key); err != nil {
		t.Fatal(err)
	}
	return acct, key
}
