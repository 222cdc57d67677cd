package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Browser starts headless Chromium (see Chromium) and returns a context
// that drives one tab of it for at most 90 seconds; both end with the test.
func Browser(t testing.TB) context.Context {
	t.Helper()
	return BrowserFor(t, 1360, 900, 90*time.Second)
}

// BrowserFor is Browser with the window's size and the tab's time bound
// given: a walk through many pages needs more than 90 seconds on a busy
// machine.
func BrowserFor(t testing.TB, width, height int, bound time.Duration) context.Context {
	t.Helper()
	chromium := Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(width, height))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	bctx, cancelTimeout := context.WithTimeout(bctx, bound)
	t.Cleanup(cancelTimeout)
	return bctx
}
