package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowserAgentsAndDocs walks agent management in headless Chromium at
// 1280 and 390 pixels: the agents list (a page of 50 of 60), creating an
// agent, a taken name marked beside its field, renaming and disabling it;
// then the console's link to the API reference, /docs, which must not
// scroll sideways at 390 pixels. Screenshots go to $AGENTAPI_ARTIFACTS_DIR.
func TestBrowserAgentsAndDocs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a, owner := f.account("Acme")
	for i := range 60 {
		f.agent(a, fmt.Sprintf("Agent %03d", i))
		f.clock.Advance(time.Millisecond)
	}
	b := newTab(t, f.srv.URL, 1280, 150*time.Second)
	b.prefix = "agents"
	// narrow: at 390 pixels nothing may scroll sideways.
	narrow := func(name string) {
		t.Helper()
		if w := b.eval("page width", `String(document.documentElement.scrollWidth)`); w != "390" {
			t.Errorf("%s at 390 pixels is %s pixels wide", name, w)
		}
	}
	base := f.srv.URL

	b.signIn(owner.Email, testPassword, "nav-docs")
	b.do("agents", chromedp.Navigate(base+"/console/agents"), chromedp.WaitVisible(chromedp.ID("agents")))
	if n := b.count("#agents tbody tr"); n != 50 {
		t.Fatalf("the agents list shows %d rows, want 50", n)
	}
	b.shots("01-list", narrow)

	b.do("create", chromedp.SendKeys(chromedp.ID("agent-name"), "Support desk"),
		chromedp.SendKeys(chromedp.ID("agent-instructions"), "Answer about orders."),
		chromedp.Click(chromedp.ID("create-agent")),
		chromedp.WaitVisible(chromedp.ID("rename-form")))
	b.shots("02-created", narrow)
	id := strings.TrimPrefix(strings.SplitN(b.eval("address", `location.pathname`), "?", 2)[0], "/console/agents/")
	made, err := f.st.GetAgent(ctx, a.ID, id)
	if err != nil || made.Name != "Support desk" || made.Instructions != "Answer about orders." || !made.Enabled {
		t.Fatalf("created %+v, %v", made, err)
	}

	b.do("taken name", chromedp.Navigate(base+"/console/agents"), chromedp.WaitVisible(chromedp.ID("agent-name")),
		chromedp.SendKeys(chromedp.ID("agent-name"), "SUPPORT DESK"),
		chromedp.Click(chromedp.ID("create-agent")),
		chromedp.WaitVisible(chromedp.ID("name-error")))
	if v := b.eval("marked", `document.getElementById('agent-name').getAttribute('aria-invalid') + ' ' + document.getElementById('agent-name').value`); v != "true SUPPORT DESK" {
		t.Fatalf("the taken name is not marked: %s", v)
	}
	b.shots("03-taken-name", narrow)

	b.do("rename", chromedp.Navigate(base+"/console/agents/"+id), chromedp.WaitVisible(chromedp.ID("rename-form")),
		chromedp.Clear(chromedp.ID("agent-name")),
		chromedp.SendKeys(chromedp.ID("agent-name"), "Support team"),
		chromedp.Click(chromedp.ID("rename-agent")),
		chromedp.WaitVisible(chromedp.CSS(".notice-ok")))
	b.do("disable", chromedp.Click(chromedp.ID("disable-agent")), chromedp.WaitVisible(chromedp.ID("enable-agent")))
	b.shots("04-disabled", narrow)
	if got, _ := f.st.GetAgent(ctx, a.ID, id); got.Name != "Support team" || got.Enabled {
		t.Fatalf("after rename and disable: %+v", got)
	}

	// The reference is Redoc rendering /v1/openapi.json under the page's
	// CSP, which would leave the page blank if it blocked the viewer.
	b.do("docs", chromedp.Click(chromedp.ID("nav-docs")), chromedp.WaitVisible(chromedp.CSS(`[data-section-id="tag/AI-agents/operation/askAgent"]`)))
	if n := b.count(`[data-section-id*="/operation/"]`); n < 10 {
		t.Fatalf("the reference shows %d operations", n)
	}
	b.shots("05-docs", narrow)
}
