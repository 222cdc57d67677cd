package mail_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/mail"
	"github.com/agentapi/agentapi/internal/mail/mailtest"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/store/storetest"
)

// clock is the worker's time: the real time moved on by what a test
// advanced it.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// rig is an account with an Owner, an Admin, an agent user and a
// deactivated Admin, and a test SMTP server.
type rig struct {
	t      *testing.T
	st     *store.Store
	srv    *mailtest.Server
	clock  *clock
	acct   domain.Account
	owner  domain.User
	admin  domain.User
	others []domain.User
}

func newRig(t *testing.T, st *store.Store) *rig { return newRigOpts(t, st, false) }

// newRigOpts is newRig whose server refuses the Owner's address for good
// when rejectOwner is set.
func newRigOpts(t *testing.T, st *store.Store, rejectOwner bool) *rig {
	t.Helper()
	st.SetMail(true)
	opts := mailtest.Options{User: "u", Password: "pw"}
	if rejectOwner {
		opts.RejectRcpt = "owner@example.com"
	}
	g := &rig{t: t, st: st, srv: mailtest.Start(t, opts), clock: &clock{}}
	g.acct = storetest.Account(t, st)
	g.owner = g.user("owner@example.com", domain.RoleOwner, true)
	g.admin = g.user("admin@example.com", domain.RoleAdmin, true)
	g.others = []domain.User{g.user("agent@example.com", domain.RoleAgent, true), g.user("gone@example.com", domain.RoleAdmin, false)}
	return g
}

func (g *rig) user(email string, role domain.Role, active bool) domain.User {
	g.t.Helper()
	u := domain.User{ID: domain.NewID("usr", time.Now()), AccountID: g.acct.ID, Email: email, Role: role, PasswordHash: "x",
		Active: active, CreatedAt: storetest.T0}
	if err := g.st.CreateUser(context.Background(), u); err != nil {
		g.t.Fatalf("create user: %v", err)
	}
	return u
}

// run starts a worker on st until the test ends.
func (g *rig) run(st *store.Store, step time.Duration) {
	g.t.Helper()
	s := sender(g.srv, "smtp", "u", "pw")
	s.Step = step
	w := mail.NewWorker(st, s, g.clock.Now, slog.New(slog.NewTextHandler(io.Discard, nil)),
		mail.WorkerConfig{From: "notices@example.com", PublicURL: "https://console.example.com", Poll: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	g.t.Cleanup(func() { cancel(); <-done })
}

// leak makes a key and reports it leaked: one api_key.leaked event.
func (g *rig) leak(name string) domain.APIKey {
	g.t.Helper()
	k := storetest.Key(g.t, g.st, g.acct.ID)
	if err := g.st.RevokeLeakedKey(context.Background(), g.acct.ID, k.ID, time.Now(), map[string]string{"type": "github_secret_scanning", "url": "https://github.com/o/r"},
		domain.AuditEvent{ID: domain.NewID(domain.PrefixEvent, time.Now()), AccountID: g.acct.ID, KeyID: k.ID, Action: "revoked",
			Actor: "secret_scanning", Detail: name, CreatedAt: time.Now()}); err != nil {
		g.t.Fatalf("leak: %v", err)
	}
	return k
}

func (g *rig) mailRows() []store.MailState {
	g.t.Helper()
	rows, err := g.st.ListMail(context.Background(), g.acct.ID)
	if err != nil {
		g.t.Fatal(err)
	}
	return rows
}

// waitRows waits until ok holds of the account's mail rows.
func (g *rig) waitRows(what string, ok func([]store.MailState) bool) []store.MailState {
	g.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows := g.mailRows()
		if ok(rows) {
			return rows
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%s: rows %+v", what, rows)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func recipients(msgs []mailtest.Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, strings.Join(m.To, ","))
	}
	slices.Sort(out)
	return out
}

// TestWorkerMailsOwnersAndAdmins, on both engines: a leaked key mails the
// active Owner and Admin, one message each with one recipient, over
// STARTTLS, once; the agent user and the deactivated Admin get none.
func TestWorkerMailsOwnersAndAdmins(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		g := newRig(t, storetest.Open(t, engine))
		g.run(g.st, time.Second)
		k := g.leak("k")
		msgs := g.srv.Wait(2, 10*time.Second)
		if got := recipients(msgs); !slices.Equal(got, []string{"admin@example.com", "owner@example.com"}) {
			t.Fatalf("recipients %v", got)
		}
		for _, m := range msgs {
			p := parse(t, []byte(m.Data))
			if !m.TLS || !strings.Contains(p.text, k.Prefix) || !strings.Contains(p.html, "console/developers/keys/"+k.ID) {
				t.Errorf("message (TLS %v):\n%s", m.TLS, p.text)
			}
			if !strings.Contains(m.Data, "\r\nTo: "+m.To[0]+"\r\n") {
				t.Errorf("To header is not the one recipient %s", m.To[0])
			}
		}
		rows := g.waitRows("sent", func(r []store.MailState) bool { return len(r) == 1 && r[0].Status == store.MailSent })
		if len(rows[0].SentTo) != 2 {
			t.Errorf("sent to %v", rows[0].SentTo)
		}
		time.Sleep(300 * time.Millisecond)
		if n := len(g.srv.Messages()); n != 2 {
			t.Fatalf("%d messages, want 2 (once each)", n)
		}
	})
}

// TestWorkerWithoutMailWritesNoRows: with mail off (no --smtp-url) a
// mailed event leaves no row behind; a type that is not mailed never does.
func TestWorkerWithoutMailWritesNoRows(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		g := newRig(t, storetest.Open(t, engine))
		storetest.Key(t, g.st, g.acct.ID) // api_key.created: not mailed
		if rows := g.mailRows(); len(rows) != 0 {
			t.Fatalf("api_key.created wrote mail rows: %+v", rows)
		}
		g.st.SetMail(false)
		g.leak("k")
		if rows := g.mailRows(); len(rows) != 0 {
			t.Fatalf("mail off wrote rows: %+v", rows)
		}
	})
}

// TestWorkerRetriesWhileServerIsDown, on both engines: a server refusing
// mail delays it (the row waits with the error) and it arrives once the
// server is back; past 3 days it is given up, with why.
func TestWorkerRetriesWhileServerIsDown(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		g := newRig(t, storetest.Open(t, engine))
		g.srv.Refuse(true)
		g.run(g.st, time.Second)
		g.leak("k")
		rows := g.waitRows("a failed attempt", func(r []store.MailState) bool { return len(r) == 1 && r[0].Attempts >= 1 })
		if rows[0].Status != store.MailPending || !strings.Contains(rows[0].LastError, "451") {
			t.Fatalf("after a refusal: %+v", rows[0])
		}
		g.srv.Refuse(false)
		g.clock.Advance(mail.Retries[0] + time.Second)
		if got := recipients(g.srv.Wait(2, 10*time.Second)); len(got) != 2 {
			t.Fatalf("after the server came back: %v", got)
		}
		g.waitRows("sent", func(r []store.MailState) bool { return r[0].Status == store.MailSent })

		g.srv.Refuse(true)
		g.leak("k2")
		g.waitRows("a failed attempt", func(r []store.MailState) bool { return len(r) == 2 && r[1].Attempts >= 1 })
		g.clock.Advance(mail.GiveUp + time.Hour)
		rows = g.waitRows("given up", func(r []store.MailState) bool { return r[1].Status == store.MailFailed })
		if !strings.Contains(rows[1].LastError, "given up after 3 days") || !strings.Contains(rows[1].LastError, "451") {
			t.Fatalf("given up: %+v", rows[1])
		}
	})
}

// TestWorkerTimesOutOnAHangingServer: a server that never answers costs
// an attempt of one step's time-out, and the mail goes once it answers.
func TestWorkerTimesOutOnAHangingServer(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		g := newRig(t, storetest.Open(t, engine))
		g.srv.Hang(true)
		g.run(g.st, 200*time.Millisecond)
		g.leak("k")
		rows := g.waitRows("a timed-out attempt", func(r []store.MailState) bool { return len(r) == 1 && r[0].Attempts >= 1 })
		if rows[0].Status != store.MailPending || rows[0].LastError == "" {
			t.Fatalf("after the hang: %+v", rows[0])
		}
		g.srv.Hang(false)
		g.clock.Advance(mail.Retries[0] + time.Second)
		if got := recipients(g.srv.Wait(2, 10*time.Second)); len(got) != 2 {
			t.Fatalf("after the server answered: %v", got)
		}
	})
}

// TestTwoWorkersMailEachOnce, on both engines: two instances (two stores
// on one database) each running a worker send each event's mail once.
func TestTwoWorkersMailEachOnce(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		a, b := storetest.OpenTwo(t, engine)
		b.SetMail(true)
		g := newRig(t, a)
		g.run(a, time.Second)
		g.run(b, time.Second)
		const keys = 12
		for i := range keys {
			g.leak("k" + string(rune('a'+i)))
		}
		g.waitRows("all sent", func(r []store.MailState) bool {
			return len(r) == keys && !slices.ContainsFunc(r, func(m store.MailState) bool { return m.Status != store.MailSent })
		})
		time.Sleep(300 * time.Millisecond)
		msgs := g.srv.Messages()
		if len(msgs) != 2*keys {
			t.Fatalf("%d messages, want %d", len(msgs), 2*keys)
		}
		ids := map[string]bool{}
		for _, m := range msgs {
			id := m.Data[strings.Index(m.Data, "Message-ID: "):]
			id = id[:strings.Index(id, "\r\n")]
			if ids[id] {
				t.Fatalf("sent twice: %s", id)
			}
			ids[id] = true
		}
	})
}

// TestMailRowsGoWithTheEvents: the events' 30-day sweep deletes mail rows
// too.
func TestMailRowsGoWithTheEvents(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		g := newRig(t, storetest.Open(t, engine))
		g.leak("k")
		if len(g.mailRows()) != 1 {
			t.Fatal("no mail row")
		}
		if _, err := g.st.DeleteOldEvents(context.Background(), time.Now().Add(time.Minute), 100); err != nil {
			t.Fatal(err)
		}
		if rows := g.mailRows(); len(rows) != 0 {
			t.Fatalf("mail rows outlived their events: %+v", rows)
		}
	})
}

// TestWorkerRejectedRecipientKeepsNoOneWaiting: a server that refuses one
// recipient for good (550) still gets the others' mail in the same
// attempt; the refused one is retried and the reason kept.
func TestWorkerRejectedRecipientKeepsNoOneWaiting(t *testing.T) {
	g := newRigOpts(t, storetest.Open(t, store.EngineSQLite), true)
	g.run(g.st, time.Second)
	g.leak("k")
	if got := recipients(g.srv.Wait(1, 10*time.Second)); !slices.Equal(got, []string{"admin@example.com"}) {
		t.Fatalf("recipients %v", got)
	}
	rows := g.waitRows("the attempt recorded", func(r []store.MailState) bool { return len(r) == 1 && r[0].Attempts >= 1 })
	if rows[0].Status != store.MailPending || !strings.Contains(rows[0].LastError, "550") || !slices.Equal(rows[0].SentTo, []string{g.admin.ID}) {
		t.Fatalf("row %+v", rows[0])
	}
}

// TestOnlyTheSevenDayReminderIsMailed, on both engines: the expiry sweep's
// 7-day api_key.expiring gets a mail row; the 1-day one does not.
func TestOnlyTheSevenDayReminderIsMailed(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		g := newRig(t, storetest.Open(t, engine))
		now := time.Now()
		week, day := now.Add(3*24*time.Hour), now.Add(12*time.Hour)
		for i, exp := range []time.Time{week, day} {
			id := domain.NewID(domain.PrefixKey, now)
			k := domain.APIKey{ID: id, AccountID: g.acct.ID, Name: "k", Prefix: "pfx_" + id[len(id)-12:], Env: domain.EnvLive,
				Hash: []byte{byte(i)}, Scopes: []domain.Scope{domain.ScopeAgentsRead}, RateLimitPerMinute: 60,
				ExpiresAt: &exp, CreatedAt: now, CreatedBy: g.owner.ID}
			if err := g.st.CreateKey(context.Background(), k, storetest.Event(g.acct.ID, id, "created", now)); err != nil {
				t.Fatalf("key %d: %v", i, err)
			}
		}
		if _, err := g.st.SweepKeyExpiry(context.Background(), now, 100); err != nil {
			t.Fatal(err)
		}
		rows := g.mailRows()
		if len(rows) != 1 {
			t.Fatalf("mail rows %+v, want one (the 7-day reminder)", rows)
		}
		ev, err := g.st.GetEvent(context.Background(), g.acct.ID, rows[0].EventID)
		if err != nil || ev.Type != domain.EventKeyExpiring || !strings.Contains(string(ev.Extra), `"7d"`) {
			t.Fatalf("the mailed event: %+v, %v", ev, err)
		}
	})
}

// TestMailLeaseOfADeadInstance, on both engines: a row claimed by an
// instance that then dies is claimed by no one until its lease runs out,
// and then is (the mail is sent again: at least once); the dead
// instance's late result is not recorded over the new one's.
func TestMailLeaseOfADeadInstance(t *testing.T) {
	storetest.EachEngine(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		g := newRig(t, storetest.Open(t, engine))
		g.leak("k")
		now := time.Now()
		dead, err := g.st.ClaimMail(ctx, "lease_dead", now, now.Add(5*time.Minute), 10)
		if err != nil || len(dead) != 1 || len(dead[0].Recipients) != 2 || dead[0].AccountName != "Acme" {
			t.Fatalf("claim: %+v, %v", dead, err)
		}
		if again, err := g.st.ClaimMail(ctx, "lease_early", now.Add(4*time.Minute), now.Add(9*time.Minute), 10); err != nil || len(again) != 0 {
			t.Fatalf("claimed within the lease: %+v, %v", again, err)
		}
		later, err := g.st.ClaimMail(ctx, "lease_late", now.Add(6*time.Minute), now.Add(11*time.Minute), 10)
		if err != nil || len(later) != 1 || later[0].Attempt != 1 {
			t.Fatalf("after the lease ran out: %+v, %v", later, err)
		}
		if err := g.st.RecordMail(ctx, store.MailOutcome{EventID: dead[0].Event.ID, Token: "lease_dead", Attempt: 1, Done: true, At: now}); err == nil {
			t.Fatal("the dead instance's result was recorded")
		}
		if err := g.st.RecordMail(ctx, store.MailOutcome{EventID: later[0].Event.ID, Token: "lease_late", Attempt: 1, Done: true,
			SentTo: []string{g.owner.ID, g.admin.ID}, At: now}); err != nil {
			t.Fatal(err)
		}
		if rows := g.mailRows(); rows[0].Status != store.MailSent || len(rows[0].SentTo) != 2 {
			t.Fatalf("row %+v", rows[0])
		}
	})
}
