package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Browser starts headless Chromium (see Chromium) and returns a context
// that drives one tab of it, its window width by height, for at most bound
// (a walk through many pages needs minutes on a busy machine); both end
// with the test.
func Browser(t testing.TB, width, height int, bound time.Duration) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(width, height))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	bctx, cancelTimeout := context.WithTimeout(bctx, bound)
	t.Cleanup(cancelTimeout)
	return bctx
}
