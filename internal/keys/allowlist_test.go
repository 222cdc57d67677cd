package keys_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/keys"
)

func mustAllowList(t *testing.T, s string) domain.AllowList {
	t.Helper()
	l, err := domain.ParseAllowList(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A key is created with its allowlist, a rotation keeps it, and an edit is
// audited with the old and new lists; an edit to the same list, by a user
// of another account, or of a revoked key changes nothing.
func TestAllowedIPsLifecycle(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	owner := w.users["owner@acme.test"]
	actor := keys.Actor{User: &owner}
	c, err := w.svc.Create(ctx, actor, keys.CreateParams{AccountID: w.account.ID, Name: "ci",
		Scopes: []domain.Scope{domain.ScopeAgentsRead}, AllowedIPs: mustAllowList(t, "127.0.0.2, ::ffff:10.0.0.0/104")})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Key.AllowedIPs.Strings(); !slices.Equal(got, []string{"127.0.0.2", "10.0.0.0/8"}) {
		t.Fatalf("created with %q", got)
	}
	r, err := w.svc.Rotate(ctx, actor, w.account.ID, c.Key.ID, nil)
	if err != nil || !slices.Equal(r.Key.AllowedIPs, c.Key.AllowedIPs) {
		t.Fatalf("rotated key's list %q (%v)", r.Key.AllowedIPs.Strings(), err)
	}
	k, err := w.svc.SetAllowedIPs(ctx, actor, w.account.ID, c.Key.ID, mustAllowList(t, "192.0.2.0/24"))
	if err != nil || k.AllowedIPs.String() != "192.0.2.0/24" {
		t.Fatalf("set: %q %v", k.AllowedIPs.String(), err)
	}
	if got, _ := w.svc.Get(ctx, w.account.ID, c.Key.ID); got.AllowedIPs.String() != "192.0.2.0/24" {
		t.Fatalf("stored %q", got.AllowedIPs.String())
	}
	if _, err := w.svc.SetAllowedIPs(ctx, actor, w.account.ID, c.Key.ID, mustAllowList(t, "192.0.2.0/24")); err != nil {
		t.Fatal(err)
	}
	stranger := w.users["owner@other.test"]
	if _, err := w.svc.SetAllowedIPs(ctx, keys.Actor{User: &stranger}, w.account.ID, c.Key.ID, nil); domain.ErrorCode(err) != domain.CodeAccessDenied {
		t.Fatalf("another account's user: %v", err)
	}
	if _, err := w.svc.SetAllowedIPs(ctx, actor, w.other.ID, c.Key.ID, nil); domain.ErrorCode(err) == "" || err == nil {
		t.Fatalf("a key of another account: %v", err)
	}
	if _, err := w.svc.SetAllowedIPs(ctx, keys.Actor{Support: true}, w.account.ID, c.Key.ID, nil); err != nil {
		t.Fatal(err)
	}
	evs, err := w.st.ListKeyAuditEvents(ctx, w.account.ID, c.Key.ID)
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for _, ev := range evs {
		if ev.Action == domain.AuditAllowedIPsChanged {
			details = append(details, ev.Actor+": "+ev.Detail)
		}
	}
	want := []string{"support: 192.0.2.0/24 → any address", "owner@acme.test: 127.0.0.2, 10.0.0.0/8 → 192.0.2.0/24"}
	if !slices.Equal(details, want) {
		t.Fatalf("history:\n%s\nwant\n%s", strings.Join(details, "\n"), strings.Join(want, "\n"))
	}
	if err := w.svc.Revoke(ctx, actor, w.account.ID, c.Key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.SetAllowedIPs(ctx, actor, w.account.ID, c.Key.ID, mustAllowList(t, "::1")); domain.ErrorCode(err) != domain.CodeImmutableState {
		t.Fatalf("revoked key: %v", err)
	}
}

// More than the maximum is refused however the list was built.
func TestCreateRefusesLongAllowList(t *testing.T) {
	w := setup(t)
	owner := w.users["owner@acme.test"]
	var l domain.AllowList
	for i := range domain.MaxAllowedIPs + 1 {
		l = append(l, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 32))
	}
	_, err := w.svc.Create(context.Background(), keys.Actor{User: &owner}, keys.CreateParams{AccountID: w.account.ID, Name: "many",
		Scopes: []domain.Scope{domain.ScopeAgentsRead}, AllowedIPs: l})
	if domain.ErrorCode(err) != domain.CodeInvalidValue {
		t.Fatalf("51 entries: %v", err)
	}
}
