package console

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/store"
)

// TestKeyFormParams: what the create form refuses, and on which field;
// and the expiry it gives a key from each choice.
func TestKeyFormParams(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	ok := keyForm{name: "k", preset: "full-access", env: "live"}
	with := func(change func(*keyForm)) keyForm {
		f := ok
		change(&f)
		return f
	}
	for _, c := range []struct {
		name    string
		form    keyForm
		field   string     // the field at fault; "" when accepted
		expires *time.Time // when accepted
	}{
		{"preset, never expires", ok, "", nil},
		{"unknown preset", with(func(f *keyForm) { f.preset = "root" }), "preset", nil},
		{"custom without scopes", with(func(f *keyForm) { f.preset = "custom" }), "scope", nil},
		{"custom with an unknown scope", with(func(f *keyForm) { f.preset, f.scopes = "custom", []string{"aiagents:read", "aiagents:admin"} }), "scope", nil},
		{"bad env", with(func(f *keyForm) { f.env = "prod" }), "env", nil},
		{"bad allowlist", with(func(f *keyForm) { f.allowedIPs = "10.0.0.300" }), "allowed_ips", nil},
		{"30 days", with(func(f *keyForm) { f.expiry = "30" }), "", new(now.AddDate(0, 0, 30))},
		{"days not offered", with(func(f *keyForm) { f.expiry = "13" }), "expiry", nil},
		{"custom date", with(func(f *keyForm) { f.expiry, f.expiresAt = "custom", "2027-01-02T15:04" }), "", new(time.Date(2027, 1, 2, 15, 4, 0, 0, time.UTC))},
		{"custom date unreadable", with(func(f *keyForm) { f.expiry, f.expiresAt = "custom", "2027-01-02" }), "expires_at", nil},
		{"custom date now", with(func(f *keyForm) { f.expiry, f.expiresAt = "custom", "2026-11-25T12:00" }), "expires_at", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := c.form.params("acc_1", now)
			var pe *pageError
			switch {
			case c.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.field != "" && (!errors.As(err, &pe) || pe.Field != c.field):
				t.Fatalf("error %v, want one on %s", err, c.field)
			case c.field == "" && (p.ExpiresAt == nil) != (c.expires == nil):
				t.Fatalf("expires %v, want %v", p.ExpiresAt, c.expires)
			case c.field == "" && c.expires != nil && !p.ExpiresAt.Equal(*c.expires):
				t.Fatalf("expires %v, want %v", p.ExpiresAt, c.expires)
			}
		})
	}
}

// TestPickerQuery: the search is cut to what the store searches by,
// whole characters only, and the page to start after counts only for
// the picker's "more" button (a new search starts from the top).
func TestPickerQuery(t *testing.T) {
	long := strings.Repeat("a", store.MaxSearch-1) + "é" // é straddles the limit
	search, after := keyForm{agentSearch: long, op: "search-agents", agentAfter: "x"}.pickerQuery()
	if search != strings.Repeat("a", store.MaxSearch-1) || after != "" {
		t.Fatalf("search %q (%d bytes), after %q", search, len(search), after)
	}
	if _, after := (keyForm{op: "more-agents", agentAfter: "x"}).pickerQuery(); after != "x" {
		t.Fatalf("more: after %q", after)
	}
}
