package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// TestREADMEShowsTheRealBanner: the walk-through's first-start banner is
// what bootstrap prints, but for the account id, the password and the
// address, which differ on every start.
func TestREADMEShowsTheRealBanner(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const start = "$ go run ./cmd/agentapi serve"
	_, rest, ok := strings.Cut(string(readme), start)
	_, rest, _ = strings.Cut(rest, "\n")
	want, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("README has no %q block", strings.TrimSpace(start))
	}

	var out bytes.Buffer
	st := storetest.Open(t, store.EngineSQLite)
	if err := bootstrap(context.Background(), env{stdout: &out, stderr: &out}, slog.New(slog.DiscardHandler), st, "http://127.0.0.1:8080", "agentapi.db"); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	acct := regexp.MustCompile(`acct_[0-9a-z]+`).FindString(got)
	pw := regexp.MustCompile(`Password:  (\S+)`).FindStringSubmatch(got)
	if acct == "" || pw == nil {
		t.Fatalf("banner without an account or password:\n%s", got)
	}
	got = strings.ReplaceAll(got, acct, "acct_01kaq…")
	got = strings.ReplaceAll(got, pw[1], "4XQ…")
	if got != want {
		t.Fatalf("README's banner differs from the real one.\nREADME:\n%s\nreal:\n%s", want, got)
	}
}
