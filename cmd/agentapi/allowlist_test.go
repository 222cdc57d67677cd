package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// key create --allowed-ips stores the list (canonical), key list shows it
// ([] for a key without one), and a bad list is a usage error (exit 2)
// naming the problem, with no key made.
func TestKeyCreateAllowedIPs(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ops.db")
	acct := mustCLI(t, db, "", "account", "create", "--name", "Acme")
	mustCLI(t, db, "a long passphrase\n", "user", "create", "--account", acct, "--email", "ann@example.com", "--role", "owner")
	create := func(extra ...string) (string, string, int) {
		args := append([]string{"key", "create", "--account", acct, "--as", "ann@example.com", "--name", "k", "--preset", "aiagent-read"}, extra...)
		return cli(t, db, "", args...)
	}
	var many []string
	for i := range 51 {
		many = append(many, fmt.Sprintf("10.0.0.%d", i))
	}
	for _, tc := range []struct{ value, says string }{
		{"10.0.0.0/33", `"10.0.0.0/33" is not an IP address or CIDR prefix`},
		{"10.0.0.1/8", "did you mean 10.0.0.0/8?"},
		{"localhost", `"localhost" is not an IP address`},
		{strings.Join(many, ","), "at most 50"},
		{"", "--allowed-ips is empty"},
		{",", "no address"},
	} {
		_, errs, code := create("--allowed-ips", tc.value)
		if code != 2 || !strings.Contains(errs, tc.says) {
			t.Errorf("--allowed-ips %.30q: exit %d, stderr %q; want 2 saying %q", tc.value, code, errs, tc.says)
		}
	}
	if _, _, code := create("--allowed-ips", strings.Join(many[:50], ",")); code != 0 {
		t.Fatalf("50 entries: exit %d", code)
	}
	mustCLI(t, db, "", "key", "create", "--account", acct, "--as", "ann@example.com", "--name", "ips", "--preset", "aiagent-read",
		"--allowed-ips", "127.0.0.2, ::1,192.168.0.0/16")
	lines := strings.Split(strings.TrimSpace(mustCLIAll(t, db, "key", "list", "--account", acct)), "\n")
	if len(lines) != 2 {
		t.Fatalf("key list: %d lines, want 2 (no key made by a refused create)", len(lines))
	}
	var got [][]string
	for _, l := range lines {
		var k struct {
			AllowedIPs []string `json:"allowed_ips"`
		}
		if err := json.Unmarshal([]byte(l), &k); err != nil || k.AllowedIPs == nil {
			t.Fatalf("key list line %s: %v", l, err)
		}
		got = append(got, k.AllowedIPs)
	}
	if len(got[0]) != 50 || !slices.Equal(got[1], []string{"127.0.0.2", "::1", "192.168.0.0/16"}) {
		t.Fatalf("allowed_ips in key list: %q", got)
	}
}

func mustCLIAll(t *testing.T, db string, args ...string) string {
	t.Helper()
	out, errs, code := cli(t, db, "", args...)
	if code != 0 {
		t.Fatalf("agentapi %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}
