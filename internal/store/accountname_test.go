package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/requestlog"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// Renaming an account changes its name and records one audit event in
// the same transaction; the same name again records none; the console's
// session read carries the name for the header.
func TestRenameAccount(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		a := storetest.Account(t, s)
		u := newUser(t, s, a.ID, "owner@example.com", domain.RoleOwner)
		h := newSession(t, s, u.ID, 1, t0.Add(time.Hour))
		ev := func(old string) domain.AuditEvent {
			return domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, t0), AccountID: a.ID, Action: domain.AuditAccountRenamed,
				Actor: "support", Detail: old + " → Globex", CreatedAt: t0}
		}
		old, err := s.RenameAccount(ctx, a.ID, "Globex", ev)
		if err != nil || old != "Acme" {
			t.Fatalf("rename = %q, %v", old, err)
		}
		if got, _ := s.GetAccount(ctx, a.ID); got.Name != "Globex" {
			t.Fatalf("name %q", got.Name)
		}
		if _, err := s.RenameAccount(ctx, a.ID, "Globex", ev); err != nil {
			t.Fatal(err)
		}
		items, _, err := s.AuditPage(ctx, store.AuditPageQuery{AccountID: a.ID, Limit: 10})
		if err != nil || len(items) != 1 || items[0].Action != domain.AuditAccountRenamed || items[0].Detail != "Acme → Globex" {
			t.Fatalf("audit %+v, %v", items, err)
		}
		sess, _, err := s.SessionUser(ctx, h, t0)
		if err != nil || sess.AccountName != "Globex" {
			t.Fatalf("session account name %q, %v", sess.AccountName, err)
		}
		_, err = s.RenameAccount(ctx, "acc_nobody", "X", ev)
		wantNotFound(t, "unknown account", err)
	})
}

// The keys list's reads: per key, hour and class in one query; a key's
// requests since its revocation, by the minute (in the revocation's
// minute only those refused).
func TestAccountKeyBuckets(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *store.Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 22, 12, 30, 0, 0, time.UTC)
		m := now.Truncate(time.Minute)
		counts := []store.UsageCount{
			{AccountID: "acc_1", KeyID: "key_1", Minute: m.Add(-10 * time.Minute), Class: requestlog.Class2xx, Count: 3},
			{AccountID: "acc_1", KeyID: "key_1", Minute: m.Add(-10 * time.Minute), Class: requestlog.Class4xx, Count: 2},
			{AccountID: "acc_1", KeyID: "key_1", Minute: m.Add(-5 * time.Minute), Class: requestlog.Class4xx, Count: 4},
			{AccountID: "acc_1", KeyID: "key_2", Minute: m.Add(-90 * time.Minute), Class: requestlog.Class5xx, Count: 1},
			{AccountID: "acc_2", KeyID: "key_3", Minute: m, Class: requestlog.Class2xx, Count: 9},
		}
		if err := s.WriteUsage(ctx, nil, counts); err != nil {
			t.Fatal(err)
		}
		got, err := s.AccountKeyBuckets(ctx, "acc_1", now.Add(-24*time.Hour), now.Add(time.Minute), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		sum := map[string]int64{}
		for _, c := range got {
			sum[c.KeyID+" "+c.Start.Format("15")+" "+c.Class] += c.Count
		}
		if len(sum) != 3 || sum["key_1 12 2xx"] != 3 || sum["key_1 12 4xx"] != 6 || sum["key_2 11 5xx"] != 1 {
			t.Fatalf("buckets %v", sum)
		}
		// Revoked at 12:20:30: the 2xx of 12:20 came before, the 4xx then
		// and at 12:25 after.
		n, err := s.KeyRequestsSince(ctx, "key_1", m.Add(-10*time.Minute+30*time.Second), requestlog.Class2xx)
		if err != nil || n != 6 {
			t.Fatalf("since = %d, %v; want 6", n, err)
		}
		if n, _ := s.KeyRequestsSince(ctx, "key_1", m, requestlog.Class2xx); n != 0 {
			t.Fatalf("since now = %d", n)
		}
	})
}
