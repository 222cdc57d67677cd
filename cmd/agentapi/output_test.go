package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/credential"
	"github.com/agentapi/agentapi/internal/domain"
)

// These tests run the built binary, as a person or a script would: its
// stdout is a pipe (not a terminal) unless a pseudo-terminal is given.

// runBin runs the built agentapi with args and AGENTAPI_DB=db plus env,
// for at most 10 s, and returns stdout, stderr and the exit code.
func runBin(t *testing.T, db string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(t), args...)
	cmd.Env = append(append(os.Environ(), "AGENTAPI_DB="+db), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("agentapi %s: still running after 10 s", strings.Join(args, " "))
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("agentapi %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// outputSeed makes an account named with '&', '<' and '>', its Owner, and
// a key of that sort of name; it returns the account and key ids.
func outputSeed(t *testing.T, db string) (acct, keyID string) {
	t.Helper()
	acct = mustCLI(t, db, "", "account", "create", "--name", "Ben & Jerry <ice>")
	mustCLI(t, db, "correct horse battery\n", "user", "create", "--account", acct, "--email", "ann@example.com", "--role", "owner")
	mustCLI(t, db, "another password\n", "user", "create", "--account", acct, "--email", "bob@example.com", "--role", "agent")
	out := mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "ann@example.com", "--name", "R&D <ci>",
		"--preset", "aiagent-read", "--allowed-ips", "10.0.0.0/8", "--json")
	var k struct{ ID string }
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatal(err)
	}
	return acct, k.ID
}

// TestOutputTableAtATerminalJSONInAPipe: a pipe gets JSON, one object a
// line, with '&', '<' and '>' as they are (not \u0026); --table gets
// aligned columns; a terminal gets the table unasked; --json and --table
// together are refused.
func TestOutputTableAtATerminalJSONInAPipe(t *testing.T) {
	db := filepath.Join(t.TempDir(), "out.db")
	acct, keyID := outputSeed(t, db)

	out, errs, code := runBin(t, db, nil, "key", "list", "--account", acct)
	if code != 0 || errs != "" || strings.Count(out, "\n") != 1 {
		t.Fatalf("key list into a pipe: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	var k map[string]any
	if err := json.Unmarshal([]byte(out), &k); err != nil || k["id"] != keyID {
		t.Fatalf("key list into a pipe is not a JSON line: %q (%v)", out, err)
	}
	if !strings.Contains(out, `"name":"R&D <ci>"`) || strings.Contains(out, `\u00`) {
		t.Fatalf("JSON escapes & < >: %s", out)
	}
	if out, _, _ := runBin(t, db, nil, "account", "list"); !strings.Contains(out, `"name":"Ben & Jerry <ice>"`) {
		t.Fatalf("account list into a pipe: %q", out)
	}

	out, _, code = runBin(t, db, nil, "key", "list", "--table", "--account", acct)
	table := regexp.MustCompile(`^ID +NAME +PREFIX +ENV +ACCESS +EXPIRES +LAST USED +STATUS\n` +
		keyID + ` +R&D <ci> +[0-9a-z]{12} +live +aiagent-read +never +never +active\n$`)
	if code != 0 || !table.MatchString(out) {
		t.Fatalf("key list --table: exit %d\n%s", code, out)
	}
	if out, _, _ := runBin(t, db, nil, "account", "list", "--table"); !regexp.MustCompile(`(?m)^` + acct + ` +Ben & Jerry <ice> +true +\S+ +2 +1$`).MatchString(out) {
		t.Fatalf("account list --table:\n%s", out)
	}
	if out, errs, code := runBin(t, db, nil, "key", "list", "--json", "--table", "--account", acct); code != 2 || out != "" ||
		errs != "agentapi: key list: give --json or --table, not both; see \"agentapi key list --help\"\n" {
		t.Fatalf("--json --table: exit %d, %q, %q", code, out, errs)
	}
	outputAtATerminal(t, db, acct, keyID)
}

// outputAtATerminal runs key list under script(1), whose pseudo-terminal
// is the command's stdout: a table, unasked; --json still gets JSON.
func outputAtATerminal(t *testing.T, db, acct, keyID string) {
	t.Helper()
	script, err := exec.LookPath("script")
	if err != nil {
		t.Log("no script(1) to give the command a terminal: the default at a terminal is not checked")
		return
	}
	atTerminal := func(args string) string {
		t.Helper()
		cmd := exec.Command(script, "-qec", binary(t)+" "+args, os.DevNull)
		cmd.Env = append(os.Environ(), "AGENTAPI_DB="+db)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("script %s: %v", args, err)
		}
		return strings.ReplaceAll(string(out), "\r\n", "\n")
	}
	if out := atTerminal("key list --account " + acct); !regexp.MustCompile(`(?m)^ID +NAME +PREFIX .* LAST USED +STATUS\n` + keyID + ` +R&D <ci> `).MatchString(out) {
		t.Fatalf("key list at a terminal is not a table:\n%s", out)
	}
	if out := atTerminal("key list --json --account " + acct); !strings.HasPrefix(out, `{"id":"`+keyID+`"`) {
		t.Fatalf("key list --json at a terminal:\n%s", out)
	}
}

// TestKeyShowAndUserList: key show prints one key by its id alone,
// everything but a secret; user list prints an account's users, never a
// password's hash; each as JSON into a pipe and as a table with --table.
func TestKeyShowAndUserList(t *testing.T) {
	db := filepath.Join(t.TempDir(), "show.db")
	acct, keyID := outputSeed(t, db)

	out, errs, code := runBin(t, db, nil, "key", "show", keyID)
	var k map[string]any
	if code != 0 || errs != "" || json.Unmarshal([]byte(out), &k) != nil {
		t.Fatalf("key show: exit %d, %q, %q", code, out, errs)
	}
	if k["id"] != keyID || k["account_id"] != acct || k["name"] != "R&D <ci>" || k["status"] != "active" || k["account_active"] != true ||
		len(k["prefix"].(string)) != 12 || k["allowed_ips"].([]any)[0] != "10.0.0.0/8" || k["env"] != "live" || !serverTime(k["created_at"]) {
		t.Fatalf("key show: %v", k)
	}
	for _, secretish := range []string{"hash", "secret", "credential", "secret_hash"} {
		if _, ok := k[secretish]; ok {
			t.Fatalf("key show shows %q", secretish)
		}
	}
	out, _, _ = runBin(t, db, nil, "key", "show", "--table", keyID)
	for _, line := range []string{`ID +` + keyID, `ACCOUNT +` + acct, `NAME +R&D <ci>`, `ACCESS +aiagent-read`, `SCOPES +aiagents:read`,
		`AGENTS +any`, `ALLOWED IPS +10\.0\.0\.0/8`, `RATE LIMIT +\d+ a minute`, `EXPIRES +never`, `LAST USED +never`, `STATUS +active`, `REVOKED +-`} {
		if !regexp.MustCompile(`(?m)^` + line + `$`).MatchString(out) {
			t.Errorf("key show --table lacks a line %q:\n%s", line, out)
		}
	}
	if out, errs, code := runBin(t, db, nil, "key", "show", "key_nope"); code != 1 || out != "" || !strings.HasPrefix(errs, `agentapi: no API key "key_nope"`) {
		t.Fatalf("key show of no key: exit %d, %q, %q", code, out, errs)
	}

	userListShows(t, db, acct)
}

// userListShows: user list prints ann and bob, bob with the one-time
// password a reset gave him, and refuses an account that does not exist.
func userListShows(t *testing.T, db, acct string) {
	t.Helper()
	mustCLI(t, db, "", "user", "reset-password", "--account", acct, "--email", "bob@example.com")
	out, errs, code := runBin(t, db, nil, "user", "list", "--account", acct)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || errs != "" || len(lines) != 2 || strings.Contains(out, "argon") || strings.Contains(out, "hash") {
		t.Fatalf("user list: exit %d, %q, %q", code, out, errs)
	}
	var ann, bob map[string]any
	if json.Unmarshal([]byte(lines[0]), &ann) != nil || json.Unmarshal([]byte(lines[1]), &bob) != nil {
		t.Fatalf("user list lines: %q", out)
	}
	if ann["email"] != "ann@example.com" || ann["role"] != "owner" || ann["status"] != "active" || ann["must_change_password"] != false ||
		bob["email"] != "bob@example.com" || bob["role"] != "agent" || bob["must_change_password"] != true || !serverTime(bob["created_at"]) {
		t.Fatalf("user list: %v %v", ann, bob)
	}
	out, _, _ = runBin(t, db, nil, "user", "list", "--table", "--account", acct)
	if !regexp.MustCompile(`^ID +EMAIL +ROLE +STATUS +PASSWORD +CREATED\nusr_\w+ +ann@example\.com +owner +active +set +\S+\nusr_\w+ +bob@example\.com +agent +active +one-time +\S+\n$`).MatchString(out) {
		t.Fatalf("user list --table:\n%s", out)
	}
	if out, errs, code := runBin(t, db, nil, "user", "list", "--account", "acct_nope"); code != 1 || out != "" || !strings.Contains(errs, `no account "acct_nope"`) {
		t.Fatalf("user list of no account: exit %d, %q, %q", code, out, errs)
	}
}

// TestUsageErrorsNameTheFlag: every command line that cannot be understood
// exits 2 with one line that names the command, the flag (or argument)
// and what it takes, and points to the command's --help; never the flag
// package's own words.
func TestUsageErrorsNameTheFlag(t *testing.T) {
	db := filepath.Join(t.TempDir(), "usage.db")
	acct, keyID := outputSeed(t, db)
	create := []string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "k"}
	for _, c := range []struct {
		args []string
		want string // after "agentapi: "
	}{
		{append(create, "--preset", "full-access", "--rate-limit", "ten"), `key create: --rate-limit must be a whole number of requests a minute, 1 to 100000000 (got "ten")`},
		{append(create, "--preset", "full-access", "--rate-limit", "0"), `key create: --rate-limit must be a whole number of requests a minute, 1 to 100000000 (got "0")`},
		{append(create, "--preset", "full-access", "--env", "prod"), `key create: --env must be live or test (got "prod")`},
		{append(create, "--preset", "full-access", "--expires-at", "tomorrow"), `key create: --expires-at must be an RFC 3339 time such as 2027-01-02T15:04:05Z (got "tomorrow")`},
		{append(create, "--preset", "root"), `key create: --preset must be aiagent-read, aiagent-query or full-access (got "root")`},
		{append(create, "--preset", "full-access", "--json=maybe"), `key create: --json must be true or false`},
		{[]string{"user", "create", "--account", acct, "--email", "cy@example.com", "--role", "boss"}, `user create: --role must be owner, admin or agent (got "boss")`},
		{[]string{"api", "webhooks", "deliveries", "we_x", "--status", "ok"}, `api webhooks deliveries: --status must be succeeded or failed (got "ok")`},
		{[]string{"key", "set-rate-limit", keyID, "ten"}, `key set-rate-limit: N must be a whole number of requests a minute, 1 to 100000000 (got "ten")`},
		{[]string{"key", "list", "--acount", acct}, `key list: there is no flag --acount (did you mean "--account"?)`},
		{[]string{"key", "list", "--account"}, `key list: --account needs a value: the account id`},
		{[]string{"key", "list"}, `key list: needs --account: the account id`},
		{[]string{"key", "show"}, `key show: expects KEY_ID, got none`},
		{[]string{"key", "revoke", keyID, "--account", acct, "--as", "ann@example.com"}, `key revoke: --account comes after an argument; flags come first`},
		{[]string{"account", "feature", "ai-answers", acct}, `account feature: needs exactly one of --enable ai-answers or --disable ai-answers, before the account ID`},
		{[]string{"account", "feature", "--enable", "ai-answers", acct, "extra"}, `account feature: expects ID, got "` + acct + `" "extra"`},
		{[]string{"api", "agents", "list", "--limit", "ten"}, `api agents list: --limit must be a whole number of items a page, 1 to 100 (got "ten")`},
		{[]string{"api", "webhooks", "rotate-secret", "we_x", "--overlap", "soon"}, `api webhooks rotate-secret: --overlap must be a duration from 0 to 168h in whole seconds, such as 1h or 90m (got "soon")`},
		{[]string{"fake-model", "--delay", "slow"}, `fake-model: --delay must be a duration such as 500ms, 30s or 5m (got "slow")`},
		{[]string{"serve", "--max-conns", "many"}, `serve: --max-conns must be a whole number (got "many")`},
	} {
		out, errs, code := runBin(t, db, nil, c.args...)
		path := "agentapi " + strings.SplitN(c.want, ":", 2)[0]
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "agentapi: "+c.want) ||
			!strings.HasSuffix(errs, `; see "`+path+` --help"`+"\n") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q\nwant exit 2 and one line: agentapi: %s…; see \"%s --help\"", c.args, code, out, errs, c.want, path)
		}
		for _, raw := range []string{"invalid value", "parse error", "flag provided but not defined", "after its flags"} {
			if strings.Contains(errs, raw) {
				t.Errorf("%q: the flag package's words: %q", c.args, errs)
			}
		}
	}
}

// TestAPIDialFailureNamesTheURL: with nothing listening where the api
// commands look, the one line says where that was and how to point them
// elsewhere (exit 1, as any network error).
func TestAPIDialFailureNamesTheURL(t *testing.T) {
	cred, err := credential.Generate(domain.EnvLive)
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + freeAddr(t) + "/v1" // free: nothing listens there
	key := "AGENTAPI_KEY=" + cred.Text
	want := "agentapi: cannot reach " + url + " (connection refused): is serve running? Set --url or AGENTAPI_URL to its address\n"
	for _, c := range []struct {
		env  []string
		args []string
	}{
		{[]string{key, "AGENTAPI_URL=" + url}, []string{"api", "me"}},
		{[]string{key}, []string{"api", "agents", "list", "--url", url}},
	} {
		out, errs, code := runBin(t, filepath.Join(t.TempDir(), "none.db"), c.env, c.args...)
		if code != 1 || out != "" || errs != want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.args, code, out, errs, want)
		}
	}
}

// TestBannerExportsTheURL: serve on an address other than the default
// prints, in its first-start banner, the AGENTAPI_URL line that points the
// api commands at it; with that line and the banner's key, they work.
func TestBannerExportsTheURL(t *testing.T) {
	db := filepath.Join(t.TempDir(), "banner.db")
	s := startServer(t, nil, "--db", db)
	banner := firstRunBanner(t, s)
	m := regexp.MustCompile(`(?m)^    export AGENTAPI_URL=(\S+)\n    export AGENTAPI_KEY=`).FindStringSubmatch(banner)
	if m == nil || m[1] != s.base+"/v1" {
		t.Fatalf("banner of serve at %s lacks export AGENTAPI_URL=%s/v1 before the key:\n%s", s.base, s.base, banner)
	}
	acct, _ := firstRunAccountAndPassword(banner)
	k := firstRunKey(t, db, acct)
	out, errs, code := runBin(t, db, []string{"AGENTAPI_URL=" + m[1], "AGENTAPI_KEY=" + k.Credential}, "api", "me")
	if code != 0 || !strings.HasPrefix(out, `{"id":"`+k.ID+`"`) {
		t.Fatalf("api me with the banner's AGENTAPI_URL: exit %d, %q, %q", code, out, errs)
	}
}

// TestAPITables: the api commands print tables with --table, and JSON
// lines with '&' as it is into a pipe.
func TestAPITables(t *testing.T) {
	s := newAPIService(t)
	key := s.key(nil, domain.ScopeAgentsRead, domain.ScopeAgentsWrite).Credential
	env := []string{"AGENTAPI_KEY=" + key, "AGENTAPI_URL=" + s.url}
	db := filepath.Join(t.TempDir(), "none.db")
	for _, name := range []string{"R&D <bot>", "Support"} {
		if out, errs, code := runBin(t, db, env, "api", "agents", "create", "--name", name); code != 0 || !strings.Contains(out, `"name":"`+name+`"`) {
			t.Fatalf("agents create %s: exit %d, %q, %q", name, code, out, errs)
		}
	}
	out, _, code := runBin(t, db, env, "api", "agents", "list", "--table")
	if code != 0 || !regexp.MustCompile(`^ID +NAME +ENABLED +CREATED\nagt_\w+ +R&D <bot> +true +\S+Z\nagt_\w+ +Support +true +\S+Z\n$`).MatchString(out) {
		t.Fatalf("agents list --table: exit %d\n%s", code, out)
	}
	out, _, _ = runBin(t, db, env, "api", "me", "--table")
	for _, line := range []string{`ACCESS +aiagents:read,aiagents:write`, `ALLOWED IPS +any`, `EXPIRES +never`} {
		if !regexp.MustCompile(`(?m)^` + line + `$`).MatchString(out) {
			t.Errorf("me --table lacks %q:\n%s", line, out)
		}
	}
	out, _, _ = runBin(t, db, env, "api", "agents", "list", "--all")
	if strings.Count(out, "\n") != 2 || !strings.Contains(out, `"name":"R&D <bot>"`) {
		t.Fatalf("agents list --all into a pipe: %q", out)
	}
}

// TestTableCells: a table shows "-" for an empty cell, leaves out an
// optional line that is empty, keeps a cell's lines under each other, and
// turns control characters (a name may hold a terminal's escape codes)
// into spaces.
func TestTableCells(t *testing.T) {
	type thing struct{ a, b, c string }
	cols := []column[thing]{
		{head: "A", cell: func(v thing) string { return v.a }},
		{head: "LONGER", cell: func(v thing) string { return v.b }},
		{head: "OPT", cell: func(v thing) string { return v.c }, optional: true},
	}
	var b bytes.Buffer
	table := true
	o := &output{w: &b, json: new(bool), table: &table}
	if err := printOne(o, thing{a: "x\x1b[31m", b: "one\ntwo"}, cols); err != nil {
		t.Fatal(err)
	}
	if want := "A       x [31m\nLONGER  one\n        two\n"; b.String() != want {
		t.Fatalf("printOne:\n%q\nwant\n%q", b.String(), want)
	}
	b.Reset()
	if err := printList(o, []thing{{a: "1", b: "p\tq"}, {b: "r"}}, cols); err != nil {
		t.Fatal(err)
	}
	if want := "A  LONGER  OPT\n1  p q     -\n-  r       -\n"; b.String() != want {
		t.Fatalf("printList:\n%q\nwant\n%q", b.String(), want)
	}
}

// TestPrintJSONRawUnescaped: what the API sent raw (an event's data) keeps
// '&', '<' and '>' as they are, as the rest of a line does, and the
// unescaping leaves an escaped backslash and other escapes alone, so the
// line decodes to the same value.
func TestPrintJSONRawUnescaped(t *testing.T) {
	raw := json.RawMessage(`{"name":"R\u0026D \u003cbot\u003e","path":"C:\\u0026x","tab":"a\tb\u00e9"}`)
	var b bytes.Buffer
	if err := printJSON(&b, map[string]any{"data": raw, "note": "x & y"}); err != nil {
		t.Fatal(err)
	}
	want := `{"data":{"name":"R&D <bot>","path":"C:\\u0026x","tab":"a\tb\u00e9"},"note":"x & y"}` + "\n"
	if b.String() != want {
		t.Fatalf("printJSON:\n%s\nwant\n%s", b.String(), want)
	}
	var got, orig map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &orig); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got["data"], orig) {
		t.Fatalf("decoded %v, want %v", got["data"], orig)
	}
}
