package console_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentapi/agentapi/internal/domain"
	"github.com/agentapi/agentapi/internal/store"
	"github.com/agentapi/agentapi/internal/webhooks"
)

const webhooksPath = "/console/developers/webhooks"

// escaped is a secret as html/template writes it in a page.
func escaped(secret string) string { return strings.ReplaceAll(secret, "+", "&#43;") }

// shownIn reports whether body shows secret.
func shownIn(body, secret string) bool {
	return strings.Contains(body, escaped(secret)) || strings.Contains(body, secret)
}

// endpointIDOf is the endpoint id in a webhook page's address.
func endpointIDOf(loc string) string { return regexpFind(`/webhooks/(we_[0-9a-z]+)`, loc) }

// TestWebhookEndpointCreate: the empty list explains webhooks; an http://
// URL is refused beside its field, with what was typed kept; a good form
// makes the endpoint (a family ticked wins over its types) and shows its
// secret exactly once, on a page of its own that is not cached, never in
// an address or a cookie; a reload lands on the endpoint's page.
func TestWebhookEndpointCreate(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, owner := f.account("Acme")
	b := f.signedIn(owner)

	list := b.get(webhooksPath)
	wantStatus(t, "webhooks list", list, http.StatusOK)
	wantHolds(t, "empty list", list.body, []string{"No webhook endpoints yet", "Verifying a delivery", `id="first-endpoint"`, `id="nav-webhooks" class="current"`}, nil)
	wantHolds(t, "developers page", b.get("/console/developers").body, []string{`href="/console/developers/webhooks" id="webhooks-link"`}, nil)

	form := b.get(webhooksPath + "/new")
	wantStatus(t, "new endpoint form", form, http.StatusOK)
	wantHolds(t, "new endpoint form", form.body, []string{`value="*" id="events-all" checked`, `value="ai_agent.*"`, `value="api_key.revoked"`, `value="webhook_endpoint.*"`}, nil)

	bad := b.post(webhooksPath+"/new", webhooksPath, url.Values{"url": {"http://hooks.example.com/in"}, "description": {"Billing"}, "enabled_events": {"*"}})
	wantStatus(t, "http:// URL", bad, http.StatusUnprocessableEntity)
	wantHolds(t, "http:// URL", bad.body, []string{`id="url-error"`, "The URL must use https://.", `value="http://hooks.example.com/in"`, `aria-invalid="true" aria-describedby="url-error"`, ">Billing</textarea>"}, nil)
	none := b.post(webhooksPath+"/new", webhooksPath, url.Values{"url": {"https://hooks.example.com/in"}})
	wantStatus(t, "no events", none, http.StatusUnprocessableEntity)
	wantHolds(t, "no events", none.body, []string{`id="enabled_events-error"`, "Choose the events to send"}, nil)
	if list, _ := f.st.ListWebhookEndpoints(ctx, a.ID); len(list) != 0 {
		t.Fatalf("refused forms made %d endpoints", len(list))
	}

	shown, secret := b.revealedSecret(webhooksPath+"/new", webhooksPath, url.Values{"url": {"https://hooks.example.com/in"},
		"description": {"Billing sync"}, "enabled_events": {"api_key.revoked", "api_key.*", "ai_agent.created"}})
	wantHolds(t, "secret page", shown.body, []string{"Endpoint added", "It will not be shown again", "Verifying a delivery", "https://hooks.example.com/in"}, nil)
	id := endpointIDOf(shown.body)
	ep, err := f.st.GetWebhookEndpoint(ctx, a.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	if ep.Secret != secret || ep.Description != "Billing sync" || strings.Join(ep.EnabledEvents, ",") != "api_key.*,ai_agent.created" {
		t.Fatalf("made %+v (secret shown %v)", ep, ep.Secret == secret)
	}
	again := b.get(webhooksPath + "/" + id + "/secret")
	wantRedirect(t, "the secret page again", again, webhooksPath+"/"+id)
	if shownIn(again.body, secret) || shownIn(b.get(webhooksPath+"/"+id).body, secret) || shownIn(b.get(webhooksPath).body, secret) {
		t.Fatal("the secret is shown twice")
	}
	// Another browser of the same user (another session) gets nothing either.
	other := f.signedIn(owner)
	wantRedirect(t, "another session's secret page", other.get(webhooksPath+"/"+id+"/secret"), webhooksPath+"/"+id)

	list = b.get(webhooksPath)
	wantHolds(t, "list", list.body, []string{`data-endpoint-id="` + id + `"`, "https://hooks.example.com/in", "Billing sync", ">api_key.*<", ">ai_agent.created<", "enabled"}, []string{"No webhook endpoints yet"})
}

// TestWebhookEndpointLimit: an account's 17th endpoint is refused with a
// notice that says why, and the list offers no "Add endpoint" at 16.
func TestWebhookEndpointLimit(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	for i := range domain.MaxWebhookEndpoints {
		f.endpoint(owner, "https://hooks.example.com/"+string(rune('a'+i)), "", "*")
	}
	b := f.signedIn(owner)
	list := b.get(webhooksPath)
	wantHolds(t, "full list", list.body, []string{`id="endpoints-full"`, "16 of 16"}, []string{`id="new-endpoint"`})
	p := b.post(webhooksPath+"/new", webhooksPath, url.Values{"url": {"https://hooks.example.com/17"}, "enabled_events": {"*"}})
	wantStatus(t, "17th endpoint", p, http.StatusConflict)
	wantHolds(t, "17th endpoint", p.body, []string{`id="form-error"`, "16 webhook endpoints, the most it may have", `value="https://hooks.example.com/17"`}, nil)
}

// TestWebhookEndpointManage: edit, disable and enable, a test event (and
// its refusal while disabled), rotation with an overlap (the new secret
// shown once), delete; each in the audit trail under its endpoint.
func TestWebhookEndpointManage(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, owner := f.account("Acme")
	ep := f.endpoint(owner, "https://hooks.example.com/in", "Billing", "api_key.*")
	path := webhooksPath + "/" + ep.ID
	b := f.signedIn(owner)
	get := func() domain.WebhookEndpoint {
		t.Helper()
		e, err := f.st.GetWebhookEndpoint(ctx, a.ID, ep.ID)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}

	edit := b.get(path + "/edit")
	wantHolds(t, "edit form", edit.body, []string{`value="https://hooks.example.com/in"`, `value="api_key.*" checked`}, []string{`id="events-all" checked`})
	p := b.post(path+"/edit", path+"/edit", url.Values{"url": {"https://hooks.example.com/v2"}, "description": {"Billing v2"}, "enabled_events": {"*", "api_key.created"}})
	wantRedirect(t, "edit", p, path+"?done=webhook-edited")
	if e := get(); e.URL != "https://hooks.example.com/v2" || e.Description != "Billing v2" || !slices.Equal(e.EnabledEvents, []string{"*"}) {
		t.Fatalf("after edit: %+v", e)
	}
	p = b.post(path+"/edit", path+"/edit", url.Values{"url": {"ftp://hooks.example.com"}, "enabled_events": {"*"}})
	wantStatus(t, "bad edit", p, http.StatusUnprocessableEntity)
	wantHolds(t, "bad edit", p.body, []string{`id="url-error"`}, nil)

	p = b.post(path, path+"/enabled", url.Values{"enabled": {"false"}})
	wantRedirect(t, "disable", p, path+"?done=webhook-disabled")
	if e := get(); e.Status != domain.WebhookDisabled || e.DisabledReason != domain.DisabledManual {
		t.Fatalf("after disable: %+v", e)
	}
	wantHolds(t, "disabled page", b.get(path).body, []string{`id="disabled-notice"`, "disabled by a user", `id="enable-endpoint"`}, []string{`id="send-test"`})
	p = b.post(path, path+"/test", nil)
	wantStatus(t, "test event while disabled", p, http.StatusConflict)
	wantHolds(t, "test event while disabled", p.body, []string{`id="form-error"`, "is disabled: enable it first"}, nil)
	p = b.post(path, path+"/enabled", url.Values{"enabled": {"true"}})
	wantRedirect(t, "enable", p, path+"?done=webhook-enabled")
	if e := get(); e.Status != domain.WebhookEnabled || e.DisabledReason != "" {
		t.Fatalf("after enable: %+v", e)
	}
	wantStatus(t, "enabled=maybe", b.post(path, path+"/enabled", url.Values{"enabled": {"maybe"}}), http.StatusBadRequest)

	p = b.post(path, path+"/test", nil)
	wantRedirect(t, "test event", p, path+"?done=webhook-test")
	if n := f.attempt(ep.ID, attemptSpec{status: 200, body: "ok", ms: 42}, 0); n != 1 {
		t.Fatalf("the test event made %d deliveries, want 1", n)
	}
	wantHolds(t, "after the test event", b.get(path).body, []string{"webhook.test", "succeeded", ">200<", "42 ms", ">delivered<"}, nil)

	rot := b.get(path + "/rotate")
	wantHolds(t, "rotate form", rot.body, []string{`value="24h" id="overlap-24h" checked`, `id="overlap-now"`, `id="overlap-7d"`}, nil)
	wantStatus(t, "bad overlap", b.post(path+"/rotate", path+"/rotate", url.Values{"overlap": {"1y"}}), http.StatusUnprocessableEntity)
	old := get().Secret
	shown, secret := b.revealedSecret(path+"/rotate", path+"/rotate", url.Values{"overlap": {"1h"}})
	e := get()
	if secret == old || e.Secret != secret || e.OldSecret != old || e.OldSecretExpiresAt == nil || !e.OldSecretExpiresAt.Equal(f.clock.Now().Truncate(time.Millisecond).Add(time.Hour)) {
		t.Fatalf("after rotation: old secret kept %v, new shown %v, old until %v", e.OldSecret == old, e.Secret == secret, e.OldSecretExpiresAt)
	}
	wantHolds(t, "rotated secret page", shown.body, []string{"Signing secret rotated", `id="old-secret"`, "Still valid until"}, []string{escaped(old)})
	wantRedirect(t, "rotated secret page again", b.get(path+"/secret"), path)
	wantHolds(t, "endpoint page after rotation", b.get(path).body, []string{`id="old-secret"`}, []string{escaped(secret), escaped(old)})

	wantHolds(t, "delete form", b.get(path+"/delete").body, []string{`id="confirm-delete"`, "cannot be undone"}, nil)
	p = b.post(path+"/delete", path+"/delete", nil)
	wantRedirect(t, "delete", p, webhooksPath+"?done=webhook-deleted")
	if _, err := f.st.GetWebhookEndpoint(ctx, a.ID, ep.ID); err == nil {
		t.Fatal("the endpoint is still there")
	}
	wantStatus(t, "deleted endpoint's page", b.get(path), http.StatusNotFound)

	audit := b.get("/console/developers/audit").body
	wantHolds(t, "audit trail", audit, []string{"webhook created", "webhook updated", "webhook secret rotated", "the old secret stays valid for 1 hour", "webhook deleted",
		"<code>" + ep.ID + "</code>", "owner@acme.example"}, []string{"webhook_endpoint_", escaped(secret), escaped(old)})
}

// TestWebhookAuditLinksEndpoint: while an endpoint exists, its events in
// the audit trail name it by its address, linked to its page.
func TestWebhookAuditLinksEndpoint(t *testing.T) {
	f := newFixture(t)
	_, owner := f.account("Acme")
	ep := f.endpoint(owner, "https://hooks.example.com/in", "", "*")
	body := f.signedIn(owner).get("/console/developers/audit").body
	wantHolds(t, "audit trail", body, []string{`href="/console/developers/webhooks/` + ep.ID + `"`, "https://hooks.example.com/in", "webhook created"}, nil)
}

// TestWebhookDeliveriesLog: the log pages 50 at a time both ways, filters
// by status and by event id (a filter posts, and lands in the address),
// shows each failure's class or status and the answer's first bytes
// escaped, with characters that reorder text made visible; Resend makes a
// delivery due again.
func TestWebhookDeliveriesLog(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	ep := f.endpoint(owner, "https://hooks.example.com/in", "", "ai_agent.*")
	path := webhooksPath + "/" + ep.ID
	for i := range 55 {
		f.agent(a, "Agent "+string(rune('A'+i%26))+string(rune('a'+i/26)))
		f.clock.Advance(time.Millisecond)
	}
	if n := f.attempt(ep.ID, attemptSpec{status: 503, body: "<script>alert(1)</script> \u202egnp.exe\u202c", ms: 12, retry: time.Minute}, 0); n != 55 {
		t.Fatalf("recorded %d attempts, want 55", n)
	}
	testEv := f.sendTest(owner, ep.ID)
	f.attempt(ep.ID, attemptSpec{errCode: "timeout", ms: 15000}, 0)
	b := f.signedIn(owner)

	first := b.get(path)
	wantStatus(t, "log", first, http.StatusOK)
	if n := strings.Count(first.body, "data-attempt-id="); n != 50 {
		t.Fatalf("the first page shows %d attempts, want 50", n)
	}
	wantHolds(t, "first page", first.body, []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;U&#43;202E&gt;gnp.exe", ">503<", "<code class=\"errcode\">timeout</code>",
		"next attempt", ">pending<", `id="next-page"`, "webhook.test"}, []string{"<script>alert", "\u202e"})
	next := regexpFind(`href="([^"]+)" rel="next"`, first.body)
	second := b.get(strings.ReplaceAll(next, "&amp;", "&"))
	if n := strings.Count(second.body, "data-attempt-id="); n != 6 {
		t.Fatalf("the second page shows %d attempts, want 6", n)
	}
	prev := regexpFind(`href="([^"]+)" rel="prev"`, second.body)
	if back := b.get(strings.ReplaceAll(prev, "&amp;", "&")); strings.Count(back.body, "data-attempt-id=") != 50 {
		t.Fatal("the previous page is not the first 50")
	}

	p := b.post(path, path+"/deliveries", url.Values{"status": {"failed"}, "event": {testEv.ID}})
	wantRedirect(t, "filter", p, path+"?")
	filtered := b.get(p.header.Get("Location"))
	if n := strings.Count(filtered.body, "data-attempt-id="); n != 1 || !strings.Contains(filtered.body, testEv.ID) {
		t.Fatalf("filtered by event: %d attempts\n%s", n, filtered.body)
	}
	if n := strings.Count(b.get(path+"?status=succeeded").body, "data-attempt-id="); n != 0 {
		t.Fatalf("%d succeeded attempts, want 0", n)
	}
	bad := b.get(path + "?event=" + url.QueryEscape("evt_<x>"))
	wantStatus(t, "bad event id", bad, http.StatusUnprocessableEntity)
	wantHolds(t, "bad event id", bad.body, []string{`id="event-error"`}, []string{"data-attempt-id="})
	wantStatus(t, "bad status", b.get(path+"?status=maybe"), http.StatusBadRequest)

	// The test event's delivery failed for good (no retry): resend it.
	p = b.post(path, path+"/deliveries/"+testEv.ID+"/resend", nil)
	wantRedirect(t, "resend", p, path+"?done=webhook-resent")
	if n := f.attempt(ep.ID, attemptSpec{status: 204}, 0); n != 1 {
		t.Fatalf("after resend %d deliveries were due, want 1", n)
	}
	got, err := f.webhookService().Attempts(context.Background(), webhooks.Actor{AccountID: a.ID}, store.AttemptQuery{EndpointID: ep.ID, EventID: testEv.ID, Limit: 10})
	if err != nil || len(got) != 2 || got[0].Status != "succeeded" || got[0].DeliveryStatus != domain.DeliveryDelivered {
		t.Fatalf("the test event's attempts after resend: %+v, %v", got, err)
	}
	wantStatus(t, "resend unknown event", b.post(path, path+"/deliveries/evt_nothing/resend", nil), http.StatusNotFound)
}

// TestWebhookPagesGuarded: the Agent role gets 404 on every webhook page
// and form, as on the other Developers pages; an Admin gets them; a form
// without the session's CSRF token changes nothing.
func TestWebhookPagesGuarded(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, owner := f.account("Acme")
	ep := f.endpoint(owner, "https://hooks.example.com/in", "", "*")
	path := webhooksPath + "/" + ep.ID
	agentUser := f.user(a, "agent@acme.example", domain.RoleAgent)
	admin := f.user(a, "admin@acme.example", domain.RoleAdmin)

	ag := f.signedIn(agentUser)
	for _, p := range []string{webhooksPath, webhooksPath + "/new", path, path + "/edit", path + "/rotate", path + "/delete", path + "/secret"} {
		got := ag.get(p)
		wantStatus(t, "Agent GET "+p, got, http.StatusNotFound)
		if strings.Contains(got.body, "nav-webhooks") {
			t.Fatalf("the Agent's page links to webhooks")
		}
	}
	for _, p := range []string{webhooksPath, path + "/edit", path + "/enabled", path + "/test", path + "/rotate", path + "/delete", path + "/deliveries"} {
		wantStatus(t, "Agent POST "+p, ag.post("/console/agents", p, url.Values{"url": {"https://x.example"}, "enabled": {"false"}}), http.StatusNotFound)
	}
	if e, _ := f.st.GetWebhookEndpoint(ctx, a.ID, ep.ID); e.Status != domain.WebhookEnabled {
		t.Fatal("an Agent changed the endpoint")
	}

	ad := f.signedIn(admin)
	wantStatus(t, "Admin list", ad.get(webhooksPath), http.StatusOK)
	wantStatus(t, "Admin endpoint", ad.get(path), http.StatusOK)

	// Another account's endpoint is no page at all.
	_, otherOwner := f.account("Other")
	wantStatus(t, "another account's endpoint", f.signedIn(otherOwner).get(path), http.StatusNotFound)

	for _, form := range []url.Values{{"csrf": {"wrong"}}, {}} {
		form.Set("enabled", "false")
		wantStatus(t, "disable without CSRF", ad.do(http.MethodPost, path+"/enabled", form), http.StatusForbidden)
		wantStatus(t, "delete without CSRF", ad.do(http.MethodPost, path+"/delete", form), http.StatusForbidden)
		form.Set("url", "https://hooks.example.com/csrf")
		form.Set("enabled_events", "*")
		wantStatus(t, "create without CSRF", ad.do(http.MethodPost, webhooksPath, form), http.StatusForbidden)
	}
	list, _ := f.st.ListWebhookEndpoints(ctx, a.ID)
	if len(list) != 1 || list[0].Status != domain.WebhookEnabled {
		t.Fatalf("forms without the token changed endpoints: %+v", list)
	}
}

// TestWebhookDisabledReasons: a list shows why each disabled endpoint is.
func TestWebhookDisabledReasons(t *testing.T) {
	f := newFixture(t)
	a, owner := f.account("Acme")
	failing := f.endpoint(owner, "https://down.example.com/hook", "", "ai_agent.*")
	f.agent(a, "Support")
	f.attempt(failing.ID, attemptSpec{errCode: "connection_refused", retry: time.Hour}, 0)
	f.clock.Advance(5*24*time.Hour + time.Minute)
	if n := f.attempt(failing.ID, attemptSpec{errCode: "connection_refused", retry: time.Hour}, 5*24*time.Hour); n != 1 {
		t.Fatalf("%d deliveries due, want 1", n)
	}
	body := f.signedIn(owner).get(webhooksPath).body
	wantHolds(t, "list", body, []string{`class="row-disabled"`, "no successful delivery for 5 days"}, nil)
	page := f.signedIn(owner).get(webhooksPath + "/" + failing.ID).body
	wantHolds(t, "failing endpoint page", page, []string{`id="disabled-notice"`, "Every attempt failed for 5 days", "connection_refused"}, nil)
}
