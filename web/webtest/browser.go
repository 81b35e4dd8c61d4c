package webtest

import (
	"context"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Browser starts headless Chromium for t and returns a context to drive it
// with chromedp. A missing Chromium fails the test: pages are tested in a
// real browser or not at all.
func Browser(t testing.TB) context.Context {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"} {
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			}
		}
	}
	if path == "" {
		if p, err := exec.LookPath("chromium"); err == nil {
			path = p
		}
	}
	if path == "" {
		t.Fatal("Chromium is needed for browser tests: apt-get install chromium (or set CHROMIUM to its path)")
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browserCtx, cancelCtx := chromedp.NewContext(allocCtx)
	// The first run starts the browser, which lives as long as that run's
	// context: start it on the untimed context, then bound the test's steps.
	if err := chromedp.Do(browserCtx); err != nil {
		cancelCtx()
		cancelAlloc()
		t.Fatalf("starting Chromium (%s): %v", path, err)
	}
	ctx, cancelTimeout := context.WithTimeout(browserCtx, 2*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	return ctx
}

// Screenshot saves a PNG of the page when CURATE_SCREENSHOTS names a folder.
func Screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("CURATE_SCREENSHOTS")
	if dir == "" {
		return
	}
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 makes a PNG
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	_ = os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(dir+"/"+name+".png", buf, 0o644); err != nil {
		t.Log(err)
	}
}

// AcceptDialogs accepts every confirm dialog the browser opens from now on
// (a person agreeing to "Deploy?", "Publish?"), and counts them.
func AcceptDialogs(t testing.TB, ctx context.Context) *atomic.Int32 {
	t.Helper()
	var n atomic.Int32
	if err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			n.Add(1)
			go func() {
				_ = chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
					_, err := cdp.Call(ctx, tg, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
					return err
				}))
			}()
		}
	}); err != nil {
		t.Fatal(err)
	}
	return &n
}
