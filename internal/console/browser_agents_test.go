package console_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/testenv"
)

// TestBrowserAgentsAndDocs walks agent management in headless Chromium at
// 1280 and 390 pixels: the agents list (a page of 50 of 60), creating an
// agent, a taken name marked beside its field, renaming and disabling it;
// then the console's link to the API reference, /docs, which must not
// scroll sideways at 390 pixels. Screenshots go to $AGENTAPI_ARTIFACTS_DIR.
func TestBrowserAgentsAndDocs(t *testing.T) {
	chromium := testenv.Chromium(t)
	f := newFixture(t)
	ctx := context.Background()
	a, owner := f.account("Acme")
	for i := range 60 {
		f.agent(a, fmt.Sprintf("Agent %03d", i))
		f.clock.Advance(time.Millisecond)
	}
	dir := os.Getenv(EnvArtifacts)
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1280, 900))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	bctx, cancelTimeout := context.WithTimeout(bctx, 150*time.Second)
	defer cancelTimeout()

	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(what, expr string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	count := func(sel string) int {
		t.Helper()
		n, err := strconv.Atoi(eval("count "+sel, `String(document.querySelectorAll(`+strconv.Quote(sel)+`).length)`))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// shots saves the page at 1280 and 390 pixels; at 390 nothing may
	// scroll sideways.
	shots := func(name string) {
		t.Helper()
		for _, width := range []int64{1280, 390} {
			do("viewport", chromedp.EmulateViewport(width, 900))
			if width == 390 {
				if w := eval("page width", `String(document.documentElement.scrollWidth)`); w != "390" {
					t.Errorf("%s at 390 pixels is %s pixels wide", name, w)
				}
			}
			png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatalf("screenshot %s: %v", name, err)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("agents-%s-%d.png", name, width)), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		do("viewport", chromedp.EmulateViewport(1280, 900))
	}
	base := f.srv.URL

	do("sign in", chromedp.Navigate(base+"/console/signin"), chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SendKeys(chromedp.ID("email"), owner.Email),
		chromedp.SendKeys(chromedp.ID("password"), testPassword),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("nav-docs")))
	do("agents", chromedp.Navigate(base+"/console/agents"), chromedp.WaitVisible(chromedp.ID("agents")))
	if n := count("#agents tbody tr"); n != 50 {
		t.Fatalf("the agents list shows %d rows, want 50", n)
	}
	shots("01-list")

	do("create", chromedp.SendKeys(chromedp.ID("agent-name"), "Support desk"),
		chromedp.SendKeys(chromedp.ID("agent-instructions"), "Answer about orders."),
		chromedp.Click(chromedp.ID("create-agent")),
		chromedp.WaitVisible(chromedp.ID("rename-form")))
	shots("02-created")
	id := strings.TrimPrefix(strings.SplitN(eval("address", `location.pathname`), "?", 2)[0], "/console/agents/")
	made, err := f.st.GetAgent(ctx, a.ID, id)
	if err != nil || made.Name != "Support desk" || made.Instructions != "Answer about orders." || !made.Enabled {
		t.Fatalf("created %+v, %v", made, err)
	}

	do("taken name", chromedp.Navigate(base+"/console/agents"), chromedp.WaitVisible(chromedp.ID("agent-name")),
		chromedp.SendKeys(chromedp.ID("agent-name"), "SUPPORT DESK"),
		chromedp.Click(chromedp.ID("create-agent")),
		chromedp.WaitVisible(chromedp.ID("name-error")))
	if v := eval("marked", `document.getElementById('agent-name').getAttribute('aria-invalid') + ' ' + document.getElementById('agent-name').value`); v != "true SUPPORT DESK" {
		t.Fatalf("the taken name is not marked: %s", v)
	}
	shots("03-taken-name")

	do("rename", chromedp.Navigate(base+"/console/agents/"+id), chromedp.WaitVisible(chromedp.ID("rename-form")),
		chromedp.Clear(chromedp.ID("agent-name")),
		chromedp.SendKeys(chromedp.ID("agent-name"), "Support team"),
		chromedp.Click(chromedp.ID("rename-agent")),
		chromedp.WaitVisible(chromedp.CSS(".notice-ok")))
	do("disable", chromedp.Click(chromedp.ID("disable-agent")), chromedp.WaitVisible(chromedp.ID("enable-agent")))
	shots("04-disabled")
	if got, _ := f.st.GetAgent(ctx, a.ID, id); got.Name != "Support team" || got.Enabled {
		t.Fatalf("after rename and disable: %+v", got)
	}

	do("docs", chromedp.Click(chromedp.ID("nav-docs")), chromedp.WaitVisible(chromedp.ID("overview")))
	if n := count("article.op"); n < 8 {
		t.Fatalf("the reference shows %d operations", n)
	}
	if bg := eval("styled", `getComputedStyle(document.querySelector('.topbar')).backgroundColor`); bg == "rgba(0, 0, 0, 0)" {
		t.Error("the reference is not styled by the console's stylesheet")
	}
	shots("05-docs")
}
