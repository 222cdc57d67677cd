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

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/agentapi/agentapi/internal/testenv"
)

// EnvArtifacts names the directory where the browser tests save their
// screenshots (a temporary directory when unset).
const EnvArtifacts = "AGENTAPI_ARTIFACTS_DIR"

// tab is one headless Chromium tab (testenv.Browser) on a console test
// server: the browser tests' steps, fatal on the first failure, and their
// screenshots. It accepts every confirmation dialog console.js opens and
// keeps the messages for dialog.
type tab struct {
	t       *testing.T
	ctx     context.Context
	base    string // the server's URL
	dir     string // where screenshots go
	prefix  string // of the file names shots writes
	dialogs chan string
}

// newTab opens a tab on base in a window width by 900 pixels, for at most
// bound.
func newTab(t *testing.T, base string, width int, bound time.Duration) *tab {
	t.Helper()
	dir := os.Getenv(EnvArtifacts)
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	b := &tab{t: t, ctx: testenv.Browser(t, width, 900, bound), base: base, dir: dir, dialogs: make(chan string, 16)}
	openings := chromedp.Events(b.ctx, cdppage.JavascriptDialogOpening)
	go func() {
		for ev, err := range openings {
			if err != nil {
				return
			}
			select {
			case b.dialogs <- ev.Message:
			default:
			}
			_, _ = chromedp.Call(b.ctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return b
}

// do runs steps; what names them in the failure.
func (b *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval is the string a JavaScript expression yields.
func (b *tab) eval(what, expr string) string {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return v
}

// text is an element's text, trimmed.
func (b *tab) text(what string, sel chromedp.ID) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(sel))
	if err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	return strings.TrimSpace(s)
}

// count is how many elements a CSS selector matches.
func (b *tab) count(sel string) int {
	b.t.Helper()
	n, err := strconv.Atoi(b.eval("count "+sel, `String(document.querySelectorAll(`+strconv.Quote(sel)+`).length)`))
	if err != nil {
		b.t.Fatal(err)
	}
	return n
}

// dialog is the oldest confirmation message not yet taken, if any.
func (b *tab) dialog() (string, bool) {
	select {
	case msg := <-b.dialogs:
		return msg, true
	default:
		return "", false
	}
}

// signIn signs in from the sign-in page and waits for landing.
func (b *tab) signIn(email, password string, landing chromedp.ID) {
	b.t.Helper()
	b.do("sign in", chromedp.Navigate(b.base+"/console/signin"), chromedp.WaitVisible(chromedp.ID("email")),
		chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), password),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(landing))
}

// shot saves the page as it is to name.png: the whole page, or what the
// window shows of a page taller than Chromium captures at once (the API
// reference at 390 pixels).
func (b *tab) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil && strings.Contains(err.Error(), "too large") {
		png, err = chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	}
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// shots saves the page at 1280 and at 390 pixels as
// <prefix>-<name>-<width>.png, calling narrow (the test's layout check)
// at 390, then returns to 1280.
func (b *tab) shots(name string, narrow func(name string)) {
	b.t.Helper()
	for _, width := range []int64{1280, 390} {
		b.do("viewport", chromedp.EmulateViewport(width, 900))
		if width == 390 {
			narrow(name)
		}
		b.shot(fmt.Sprintf("%s-%s-%d", b.prefix, name, width))
	}
	b.do("viewport", chromedp.EmulateViewport(1280, 900))
}
