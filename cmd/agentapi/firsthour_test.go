package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
)

// TestAccountListAndShowByName: account list prints every account with its
// counts (a table with --table, or JSON lines), and account show takes a name.
func TestAccountListAndShowByName(t *testing.T) {
	db := filepath.Join(t.TempDir(), "list.db")
	acme := mustCLI(t, db, "", "account", "create", "--name", "Acme")
	mustCLI(t, db, "correct horse battery\n", "user", "create", "--account", acme, "--email", "ann@example.com", "--role", "owner")
	mustCLI(t, db, "", "key", "create", "--account", acme, "--as", "ann@example.com", "--name", "k1", "--preset", "full-access")
	other := mustCLI(t, db, "", "account", "create", "--name", "Other")

	out, _, code := cli(t, db, "", "account", "list", "--table")
	table := regexp.MustCompile(`(?m)^ID +NAME +ACTIVE +CREATED +USERS +KEYS\n` + acme + ` +Acme +true +\S+ +1 +1\n` + other + ` +Other +true +\S+ +0 +0\n$`)
	if code != 0 || !table.MatchString(out) {
		t.Fatalf("account list: exit %d\n%s", code, out)
	}
	out, _, _ = cli(t, db, "", "account", "list", "--json")
	var first map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(out, "\n", 2)[0]), &first); err != nil || first["id"] != acme || first["users"] != 1.0 || first["keys"] != 1.0 || first["active"] != true {
		t.Fatalf("account list --json: %v %q", err, out)
	}

	for _, ref := range []string{acme, "Acme", "acme"} {
		if out := mustCLI(t, db, "", "account", "show", ref); !strings.Contains(out, `"id":"`+acme+`"`) {
			t.Fatalf("account show %s: %s", ref, out)
		}
	}
	mustCLI(t, db, "", "account", "create", "--name", "acme")
	if _, errs, code := cli(t, db, "", "account", "show", "Acme"); code != 1 || !strings.Contains(errs, "2 accounts are named") {
		t.Fatalf("a shared name: exit %d %q", code, errs)
	}
	if _, errs, code := cli(t, db, "", "account", "show", "Nobody"); code != 1 || !strings.Contains(errs, "agentapi account list") {
		t.Fatalf("an unknown name: exit %d %q", code, errs)
	}
}

// TestHelpAtEveryLevel: help, -h and --help answer at every level of the
// command tree (exit 0, usage on stdout), and a mistyped command or flag
// gets the nearest one suggested.
func TestHelpAtEveryLevel(t *testing.T) {
	var visit func(c command, path []string)
	visit = func(c command, path []string) {
		for _, h := range []string{"help", "-h", "--help"} {
			var out, errb bytes.Buffer
			code := run(context.Background(), append(path[1:], h), func(string) string { return "" }, strings.NewReader(""), &out, &errb)
			if code != 0 || !strings.Contains(out.String(), "Usage") || !strings.Contains(out.String(), path[len(path)-1]) {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q", strings.Join(path, " "), h, code, out.String(), errb.String())
			}
		}
		helpFirstIsHelpLast(t, path[1:])
		for _, sub := range c.subs {
			visit(sub, append(append([]string{}, path...), sub.name))
		}
	}
	visit(commandTree(), []string{"agentapi"})

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"acount", "list"}, `unknown command "agentapi acount" (did you mean "agentapi account"?)`},
		{[]string{"key", "revok", "x"}, `(did you mean "agentapi key revoke"?)`},
		{[]string{"api", "agents", "lst"}, `(did you mean "agentapi api agents list"?)`},
		{[]string{"key", "list", "--acount", "x"}, `agentapi: key list: there is no flag --acount (did you mean "--account"?)`},
		{[]string{"api", "agents", "list", "--limt", "2"}, `(did you mean "--limit"?)`},
		{[]string{"frobnicate"}, `unknown command "agentapi frobnicate"; agentapi has serve, fake-model`},
	} {
		_, errs, code := cli(t, filepath.Join(t.TempDir(), "x.db"), "", c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want %q", c.args, code, errs, c.want)
		}
	}
}

// helpFirstIsHelpLast: "agentapi help key create" prints what "agentapi
// key create help" prints.
func helpFirstIsHelpLast(t *testing.T, path []string) {
	t.Helper()
	say := func(args ...string) string {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &out, &errb)
		return fmt.Sprint(code, out.String(), errb.String())
	}
	if first, last := say(append([]string{"help"}, path...)...), say(append(path, "help")...); first != last {
		t.Errorf("help %s printed:\n%s\nwant, as %s help:\n%s", strings.Join(path, " "), first, strings.Join(path, " "), last)
	}
}

// TestChangesArePrinted: a command that changes something prints the id
// and what it is now; create commands still print the id alone.
func TestChangesArePrinted(t *testing.T) {
	db := filepath.Join(t.TempDir(), "changes.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Acme")
	mustCLI(t, db, "correct horse battery\n", "user", "create", "--account", acct, "--email", "ann@example.com", "--role", "owner")
	out, _, _ := cli(t, db, "", "key", "create", "--account", acct, "--as", "ann@example.com", "--name", "k", "--preset", "full-access", "--json")
	var k struct{ ID string }
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"key", "set-rate-limit", k.ID, "50"}, k.ID + " rate_limit_per_minute 50\n"},
		{[]string{"key", "revoke", "--account", acct, "--as", "ann@example.com", k.ID}, k.ID + " revoked\n"},
		{[]string{"account", "deactivate", acct}, acct + " inactive\n"},
		{[]string{"account", "activate", acct}, acct + " active\n"},
		{[]string{"account", "feature", "--enable", string(domain.FeatureAIAnswers), acct}, acct + " ai-answers enabled\n"},
	} {
		if out, errs, code := cli(t, db, "", c.args...); code != 0 || out != c.want {
			t.Errorf("%v: exit %d, stdout %q (want %q), stderr %q", c.args, code, out, c.want, errs)
		}
	}
}

// TestAPIListOnePageAndRequestIDs: api agents list prints one page and
// says how to get the next (--next), or every page with --all; a refusal
// names the request id.
func TestAPIListOnePageAndRequestIDs(t *testing.T) {
	s := newAPIService(t)
	key := s.key(nil, domain.ScopeAgentsRead, domain.ScopeAgentsWrite).Credential
	for _, name := range []string{"a", "b", "c"} {
		mustAPI(t, key, s.url, "agents", "create", "--name", name)
	}
	out, errs, code := apiCLI(t, key, s.url, "", "agents", "list", "--limit", "2")
	next := regexp.MustCompile(`--next (\S+) \(or --all\)`).FindStringSubmatch(errs)
	if code != 0 || strings.Count(out, "\n") != 2 || next == nil {
		t.Fatalf("one page: exit %d, %q, %q", code, out, errs)
	}
	if got := mustAPI(t, key, s.url, "agents", "list", "--limit", "2", "--next", next[1]); len(got) != 1 || got[0]["name"] != "c" {
		t.Fatalf("the next page: %v", got)
	}
	if got := mustAPI(t, key, s.url, "agents", "list", "--limit", "2", "--all"); len(got) != 3 {
		t.Fatalf("--all: %v", got)
	}
	_, errs, code = apiCLI(t, key, s.url, "", "agents", "get", "agt_nope")
	if code != 1 || !regexp.MustCompile(`not_found: .* request_id=req_\S+`).MatchString(errs) {
		t.Fatalf("a refusal: exit %d %q", code, errs)
	}
}

// TestWalkThroughReachesAStreamedAnswer: the README's walk-through, the
// built serve included: fake-model, serve --llm-url, a key from the
// banner's command, ai-answers on, an agent, and a streamed answer.
func TestWalkThroughReachesAStreamedAnswer(t *testing.T) {
	modelAddr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"fake-model", "--addr", modelAddr, "--delay", "1ms"}, func(string) string { return "" }, strings.NewReader(""), io.Discard, io.Discard)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("fake-model exit %d", code)
		}
	})
	db := filepath.Join(t.TempDir(), "walk.db")
	s := startServer(t, nil, "--db", db, "--llm-url", "http://"+modelAddr+"/v1", "--llm-model", "fake")
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(s.stdout.String(), "/v1/me") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	create := regexp.MustCompile(`\$\(\S+ (key create .*)\)\n`).FindStringSubmatch(s.stdout.String())
	if create == nil {
		t.Fatalf("no key create command in the banner:\n%s", s.stdout.String())
	}
	args := regexp.MustCompile(`"[^"]*"|\S+`).FindAllString(create[1], -1)
	for i := range args {
		args[i] = strings.Trim(args[i], `"`)
	}
	key := mustCLI(t, db, "", args...)
	acct := regexp.MustCompile(`acct_[0-9a-z]+`).FindString(mustCLI(t, db, "", "account", "list", "--json"))
	mustCLI(t, db, "", "account", "feature", "--enable", "ai-answers", acct)
	agent := mustAPI(t, key, s.base+"/v1", "agents", "create", "--name", "Support bot")[0]["id"].(string)
	out, errs, code := apiCLI(t, key, s.base+"/v1", "", "ask", "--stream", agent, "Where is order 1042?")
	if code != 0 || !strings.Contains(out, `This is agentapi's fake model. You asked: "Where is order 1042?"`) {
		t.Fatalf("ask --stream: exit %d, %q, %q", code, out, errs)
	}
}
