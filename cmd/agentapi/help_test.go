package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// TestHelpNamesEveryFlag: `agentapi help` shows every flag that a command's
// own -h prints, so that nobody has to guess a flag exists (it once left out
// key create's --allowed-ips and api ask's --stream). Flags that every
// command of a kind takes are described once below the list instead.
func TestHelpNamesEveryFlag(t *testing.T) {
	shared := map[string]bool{"db": true, "redis": true, "url": true, "insecure-http": true}
	flagLine := regexp.MustCompile(`(?m)^  -([a-z-]+)`)
	for _, cmd := range [][]string{
		{"account", "create"}, {"account", "show"}, {"account", "deactivate"}, {"account", "activate"},
		{"account", "feature"}, {"user", "create"}, {"user", "reset-password"},
		{"key", "create"}, {"key", "revoke"}, {"key", "set-rate-limit"}, {"key", "list"},
		{"api", "me"}, {"api", "agents", "list"}, {"api", "agents", "get"}, {"api", "agents", "create"},
		{"api", "agents", "update"}, {"api", "ask"},
		{"api", "events", "list"}, {"api", "events", "get"}, {"api", "webhooks", "create"},
		{"api", "webhooks", "rotate-secret"}, {"api", "webhooks", "deliveries"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), append(cmd, "-h"), func(string) string { return "" },
			strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Fatalf("%v -h: exit %d, %s", cmd, code, stderr.String())
		}
		flags := flagLine.FindAllStringSubmatch(stdout.String()+stderr.String(), -1)
		if len(flags) == 0 {
			t.Fatalf("%v -h printed no flags:\n%s%s", cmd, stdout.String(), stderr.String())
		}
		for _, f := range flags {
			shown := regexp.MustCompile(`--` + f[1] + `([^a-z-]|$)`).MatchString(usage)
			if !shared[f[1]] && !shown {
				t.Errorf("agentapi help does not show %v's --%s", cmd, f[1])
			}
		}
	}
}
