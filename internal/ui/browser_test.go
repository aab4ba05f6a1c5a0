package ui

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/rolter/rolter/internal/admin"
)

// The browser tests drive Debian's chromium, headless, through chromedp,
// against the UI over a real store (the harness). One browser serves the
// whole test binary; each test gets a fresh browser context (its own
// cookies) in a new tab. Without chromium they skip, except under CI=true,
// where .ci/run installs it and a missing one is a failure.

// chromiumPath is where Debian installs chromium; ROLTER_CHROMIUM
// overrides it.
func chromiumPath() string {
	if p := os.Getenv("ROLTER_CHROMIUM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	return "/usr/bin/chromium"
}

var chrome struct {
	once   sync.Once
	ctx    context.Context // the browser's chromedp context
	cancel func()
	err    error
}

// TestMain stops the shared browser after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if chrome.cancel != nil {
		chrome.cancel()
	}
	os.Exit(code)
}

// startBrowser starts the shared chromium once: headless, without the
// sandbox (the tests run as root), the GPU, QUIC or any background
// traffic, on a fresh profile.
func startBrowser() {
	dir, err := os.MkdirTemp("", "rolter-ui-chromium-")
	if err != nil {
		chrome.err = err
		return
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromiumPath()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancelBrowser := chromedp.NewContext(alloc)
	chrome.ctx = ctx
	chrome.cancel = func() {
		cancelBrowser()
		cancelAlloc()
		_ = os.RemoveAll(dir)
	}
	// The first Run starts the browser; its context must not time out.
	chrome.err = chromedp.Do(ctx)
}

// tab is one test's tab, with what the page reported: JavaScript dialogs
// (an XSS would open one), exceptions and CSP violations.
type tab struct {
	t   *testing.T
	ctx context.Context
	// base is the tab without the test's deadline, to report what the page
	// showed after a step timed out.
	base context.Context
	h    *harness

	mu       sync.Mutex
	dialogs  []string
	problems []string
}

// newTab opens a tab in a fresh browser context for h's server, with a
// 120 s budget for the whole test: a test takes 5-15 s, a few times that
// on a loaded two-core CI machine.
func newTab(t *testing.T, h *harness) *tab {
	t.Helper()
	if _, err := os.Stat(chromiumPath()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is required under CI=true (.ci/run installs it) but not found at %s: %v", chromiumPath(), err)
		}
		t.Skipf("skipping browser test: no chromium at %s (apt-get install chromium, or set ROLTER_CHROMIUM)", chromiumPath())
	}
	chrome.once.Do(startBrowser)
	if chrome.err != nil {
		t.Fatalf("start chromium: %v", chrome.err)
	}
	tb := &tab{t: t, h: h}
	ctx, cancel := chromedp.NewContext(chrome.ctx, chromedp.WithNewBrowserContext(), chromedp.WithListener(tb.observe))
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // open the tab without a deadline
		t.Fatalf("open tab: %v", err)
	}
	tb.base = ctx
	ctx, cancelTimeout := context.WithTimeout(ctx, 120*time.Second)
	t.Cleanup(cancelTimeout)
	tb.ctx = ctx
	return tb
}

// observe records what the page reports; it runs on chromedp's reader
// goroutine, so it only appends.
func (tb *tab) observe(ev any) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	switch e := ev.(type) {
	case *page.EventJavascriptDialogOpening:
		tb.dialogs = append(tb.dialogs, string(e.Type)+": "+e.Message)
	case *runtime.EventExceptionThrown:
		tb.problems = append(tb.problems, "exception: "+e.ExceptionDetails.Text+" "+exceptionText(e.ExceptionDetails))
	case *log.EventEntryAdded:
		if strings.Contains(e.Entry.Text, "Content Security Policy") {
			tb.problems = append(tb.problems, "CSP: "+e.Entry.Text)
		}
	}
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil {
		return d.Exception.Description
	}
	return ""
}

// do runs actions, failing the test with what the page showed.
func (tb *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, actions...); err != nil {
		ctx, cancel := context.WithTimeout(tb.base, 5*time.Second)
		defer cancel()
		page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.documentElement.outerHTML`))
		tb.t.Fatalf("%s: %v\npage: %.3000s", what, err, page)
	}
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	s, err := chromedp.Run(tb.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		tb.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// waitFor waits until the JavaScript condition holds (no fixed sleeps).
func (tb *tab) waitFor(what, cond string) {
	tb.t.Helper()
	tb.do(what, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(50*time.Second)))
}

// htmxSettled, appended to a waitFor condition, also waits for htmx to
// finish a swap: it wires up what it swapped in (hx-* attributes) only
// when the swap settles, so a click before that would go unheard.
const htmxSettled = ` && !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')`

// navigate runs act, a click or submit that loads a new page (a link
// followed, a form posted and redirected), waits until that page is in,
// then runs then. A wait for an element alone could be met by the page
// being left, whose nodes vanish under the next step; so the page is
// marked first, and the new one is in once it is unmarked, at want (a
// path, or a path and query when want has a "?"), fully loaded, and htmx
// is done with it.
func (tb *tab) navigate(what, want string, act chromedp.Action[chromedp.Void], then ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	tb.do(what+": mark the page being left", chromedp.Evaluate[chromedp.Void](`window.rolterLeftPage = true`))
	tb.do(what, act)
	at := `location.pathname`
	if strings.Contains(want, "?") {
		at = `location.pathname + location.search`
	}
	tb.untilAcrossNav(what+": the page at "+want, `(() => {
		if (window.rolterLeftPage) return 'still on the page being left, ' + location.href;
		if (`+at+` !== `+jsString(want)+`) return 'at ' + location.pathname + location.search;
		if (document.readyState !== 'complete') return 'document ' + document.readyState;
		if (!window.htmx) return 'no htmx';
		if (document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')) return 'htmx busy';
		return '';
	})()`)
	if len(then) > 0 {
		tb.do(what, then...)
	}
}

// waitAfterNav waits until cond holds in the page, across the navigation
// just started (see untilAcrossNav).
func (tb *tab) waitAfterNav(what, cond string) {
	tb.t.Helper()
	tb.untilAcrossNav(what, `(`+cond+`) ? '' : 'not yet'`)
}

// untilAcrossNav waits until the JavaScript expression state, which says
// what is still missing, gives "". It asks with plain evaluations on an
// interval, for up to 50 s: an evaluation that a navigation cuts short is
// simply asked again in the new page, and after a restore from the
// back/forward cache chromedp's polling (and its load wait) may never see
// the page's frame settle.
func (tb *tab) untilAcrossNav(what, state string) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 50*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := "not asked yet"
	for {
		ectx, ecancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := chromedp.Run(ectx, chromedp.Evaluate[string](state))
		ecancel()
		switch {
		case err == nil && got == "":
			return
		case err != nil:
			last = "evaluation: " + err.Error()
		default:
			last = got
		}
		select {
		case <-ctx.Done():
			tb.t.Fatalf("%s: %v (last seen: %s)", what, ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\n", `\n`).Replace(s) + "'"
}

// screenshot writes the page as a PNG under the test's temp dir and logs
// where. With ROLTER_UI_SCREENSHOTS set to a directory, the PNGs go there
// instead and are kept (for docs/ui.md).
func (tb *tab) screenshot(name string) {
	tb.t.Helper()
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := os.Getenv("ROLTER_UI_SCREENSHOTS")
	if dir == "" {
		dir = tb.t.TempDir()
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o600); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("screenshot %s: %s (%d bytes)", name, path, len(png))
}

// clean fails the test if the page opened a dialog, threw, or broke the
// CSP.
func (tb *tab) clean() {
	tb.t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.dialogs) > 0 {
		tb.t.Fatalf("the page opened dialogs: %q", tb.dialogs)
	}
	if len(tb.problems) > 0 {
		tb.t.Fatalf("the page reported: %q", tb.problems)
	}
}

// login logs in through the form and lands on the Models page.
func (tb *tab) login(token string) {
	tb.t.Helper()
	tb.do("open the UI", chromedp.Navigate(tb.h.srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	tb.screenshot("login")
	tb.do("type the token", chromedp.SendKeys(chromedp.CSS("#token"), token))
	tb.navigate("log in", "/ui/models", chromedp.Submit(chromedp.CSS("#token")), chromedp.WaitVisible(chromedp.CSS("#models-table")))
}

// demoLike gives the harness what `rolter serve --demo` registers: a
// provider "demo" serving demo-model and a route "demo" to it.
func demoLike(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	if _, err := h.svc.CreateProvider(ctx, "default", admin.ProviderInput{Name: "rolter demo upstream", Slug: "demo", Kind: "vllm",
		BaseURL: "http://127.0.0.1:9/demo/v1", Models: []string{"demo-model"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.CreateRoute(ctx, "default", "default", admin.RouteInput{Model: "demo",
		Targets: []admin.TargetInput{{Provider: "demo", UpstreamModel: "demo-model"}}}); err != nil {
		t.Fatal(err)
	}
}

func TestBrowserLoginModelsSearchAndLogout(t *testing.T) {
	h := newHarness(t, Options{})
	demoLike(t, h)
	tb := newTab(t, h)
	tb.login(h.token)
	table := tb.text("#models-table")
	for _, want := range []string{"routes of project default", "demo", "demo/demo-model", "rolter demo upstream"} {
		if !strings.Contains(table, want) {
			t.Fatalf("Models page lacks %q:\n%s", want, table)
		}
	}
	if h1 := tb.text("h1"); h1 != "Models (2)" {
		t.Fatalf("heading %q", h1)
	}
	tb.screenshot("models")
	// Typing searches server-side; htmx swaps the table and the URL keeps
	// the query.
	tb.do("search", chromedp.SendKeys(chromedp.CSS("#models-q"), "demo/"))
	tb.waitFor("search result", `document.querySelector('#models-table').innerText.includes('1 of 2 addresses match')`)
	tb.waitFor("deep link", `location.search.includes('q=demo%2F')`)
	tb.navigate("log out", "/ui/login", chromedp.Click(chromedp.CSS(".topbar button[type=submit]:not(.js-hide)")), chromedp.WaitVisible(chromedp.CSS("#token")))
	tb.do("after logout", chromedp.Navigate(h.srv.URL+"/ui/models"), chromedp.WaitVisible(chromedp.CSS("#token")))
	tb.clean()
}

func TestBrowserCreateProviderAcceptingTheSlugSuggestion(t *testing.T) {
	h := newHarness(t, Options{})
	demoLike(t, h)
	tb := newTab(t, h)
	tb.login(h.token)
	tb.navigate("providers", "/ui/providers", chromedp.Click(chromedp.CSS(`.sidebar a[href^="/ui/providers"]`)), chromedp.WaitVisible(chromedp.CSS("table")))
	tb.screenshot("providers")
	tb.navigate("add provider", "/ui/providers/_new", chromedp.Click(chromedp.CSS(`a.btn-primary`)), chromedp.WaitVisible(chromedp.CSS("#name")))
	// "demo" is taken: the pre-check offers demo-2, and one click takes it.
	tb.do("type a taken name", chromedp.SendKeys(chromedp.CSS("#name"), "Demo"))
	tb.waitFor("slug conflict", `document.querySelector('#slug-check').innerText.includes('taken')`+htmxSettled)
	if got := tb.text("#slug-check"); !strings.Contains(got, "demo-2") {
		t.Fatalf("slug check: %q", got)
	}
	tb.screenshot("provider-slug-conflict")
	tb.do("accept the suggestion", chromedp.Click(chromedp.CSS(`#slug-check button[data-fill-value="demo-2"]`)))
	tb.waitFor("suggestion taken", `document.querySelector('#slug').value === 'demo-2' && document.querySelector('#slug-check').innerText.includes('available')`)
	tb.do("fill",
		chromedp.SendKeys(chromedp.CSS("#base_url"), "http://10.0.0.7:8000/v1"),
		chromedp.SendKeys(chromedp.CSS("#models"), "demo-model"),
	)
	tb.navigate("submit", "/ui/providers/demo-2", chromedp.Submit(chromedp.CSS("#base_url")), chromedp.WaitVisible(chromedp.CSS(".flash")))
	if got := tb.text("h1"); got != "demo-2 Demo" {
		t.Fatalf("provider page heading %q", got)
	}
	tb.screenshot("provider")
	if _, err := h.svc.GetProvider(context.Background(), "default", "demo-2"); err != nil {
		t.Fatalf("provider not created: %v", err)
	}
	tb.do("back to the list", chromedp.Navigate(h.srv.URL+"/ui/providers"), chromedp.WaitVisible(chromedp.CSS("table")))
	if got := tb.text("h1"); got != "Providers (2)" {
		t.Fatalf("list heading %q", got)
	}
	tb.clean()
}

func TestBrowserProviderNamedScriptIsTextAndPostsNeedTheToken(t *testing.T) {
	h := newHarness(t, Options{})
	const evil = `<script>alert(1)</script>`
	if _, err := h.svc.CreateProvider(context.Background(), "default", admin.ProviderInput{Name: evil, Slug: "xss", Kind: "vllm",
		BaseURL: "http://10.0.0.5/v1", Models: []string{`<img src=x onerror=alert(2)>`}}); err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, h)
	tb.login(h.token)
	if got := tb.text("#models-table"); !strings.Contains(got, "xss/<img src=x onerror=alert(2)>") || !strings.Contains(got, evil) {
		t.Fatalf("Models page does not show the names as text:\n%s", got)
	}
	tb.do("providers", chromedp.Navigate(h.srv.URL+"/ui/providers"), chromedp.WaitVisible(chromedp.CSS("table")))
	if got := tb.text("tbody tr td:nth-child(2)"); got != evil {
		t.Fatalf("name cell shows %q, want the literal text %q", got, evil)
	}
	tb.screenshot("providers-xss")
	tb.do("detail", chromedp.Navigate(h.srv.URL+"/ui/providers/xss"), chromedp.WaitVisible(chromedp.CSS("#name")))
	if v, err := chromedp.Run(tb.ctx, chromedp.Value(chromedp.CSS("#name"))); err != nil || v != evil {
		t.Fatalf("name field %q %v", v, err)
	}
	// A POST from the page without the CSRF token is refused.
	status, err := chromedp.Run(tb.ctx, chromedp.Evaluate[int](`fetch('/ui/providers/_new', {method: 'POST',
		body: new URLSearchParams({org: 'default', name: 'no token', kind: 'vllm', base_url: 'http://10.0.0.5/v1'})}).then(r => r.status)`,
		chromedp.EvalAwaitPromise))
	if err != nil || status != 403 {
		t.Fatalf("POST without CSRF token from the page: %d %v", status, err)
	}
	if _, err := h.svc.GetProvider(context.Background(), "default", "no-token"); err == nil {
		t.Fatal("the refused POST created a provider")
	}
	tb.clean()
}
