package ui

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/testkit"
)

var virtualKeyRe = regexp.MustCompile(`rk-[A-Za-z0-9_-]{20,}`)

func keyFields(kv ...string) url.Values {
	f := url.Values{"org": {"default"}, "project": {"default"}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Set(kv[i], kv[i+1])
	}
	return f
}

func listKeys(t *testing.T, h *harness, project string) []admin.VirtualKeyView {
	t.Helper()
	p, err := h.svc.ListKeys(context.Background(), "default", project, admin.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Data
}

// TestKeyMintShowsTheSecretOnce: minting answers with the secret in the
// secret-once dialog, over the list that now has the key; no later page
// shows it, and through htmx the address bar moves to the plain list.
func TestKeyMintShowsTheSecretOnce(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	expires := time.Now().Add(30 * 24 * time.Hour).UTC().Format(expiresLayout)
	r := b.postCSRF("/ui/keys/_new", keyFields("name", "ci-bot", "models", "demo\n\ndemo/demo-model", "rpm_limit", "60", "tpm_limit", "",
		"budget.amount", "10.50", "budget.period", "month", "expires_at", expires))
	if r.status != http.StatusOK {
		t.Fatalf("mint: %d %s", r.status, r.body)
	}
	keys := listKeys(t, h, "default")
	if len(keys) != 1 {
		t.Fatalf("keys %+v", keys)
	}
	k := keys[0]
	if k.Name != "ci-bot" || strings.Join(k.Models, ",") != "demo,demo/demo-model" || k.RPMLimit != 60 || k.TPMLimit != 0 ||
		k.Budget == nil || k.Budget.Amount.USD() != "10.5" || k.Budget.Period != "month" || k.ExpiresAt == nil ||
		k.ExpiresAt.UTC().Format(expiresLayout) != expires {
		t.Fatalf("stored %+v", k)
	}
	secret := virtualKeyRe.FindString(r.body)
	if secret == "" || !strings.HasPrefix(secret, k.Prefix+"_") {
		t.Fatalf("no secret of %s in the answer:\n%s", k.Prefix, r.body)
	}
	mustContain(t, "minted", r.body, "Virtual key ci-bot", "data-show-on-load data-remove-on-close", `data-copy="`+secret+`"`,
		"Key <strong>ci-bot</strong> minted", `id="key-`+itoa64(k.ID)+`"`, k.Prefix+"…", "demo, demo/demo-model", "60 requests/min",
		"$10.5 per month", `<span class="status st-ok">active</span>`)
	if outside := outsideDialog(t, r.body); strings.Contains(outside, secret) {
		t.Fatalf("the secret shows outside its dialog:\n%s", outside)
	}
	for _, p := range []string{"/ui/keys", "/ui/keys?org=default&project=default&done=created&key=ci-bot", "/ui/keys/" + itoa64(k.ID), "/ui/models"} {
		testkit.AssertNoSecrets(t, p, b.get(p).body, secret)
	}

	// Through htmx.
	form := keyFields("name", "second", "csrf", b.csrf())
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/ui/keys/_new", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	r = b.do(req)
	if r.status != http.StatusOK || r.header.Get("HX-Replace-Url") != "/ui/keys?org=default&project=default" || strings.Contains(r.body, "<html") {
		t.Fatalf("htmx mint: %d %q %.300s", r.status, r.header.Get("HX-Replace-Url"), r.body)
	}
	mustContain(t, "htmx mint", r.body, "Virtual key second", "data-show-on-load", "rk-", `<table id="keys-table">`)
}

// TestKeyFormErrorsStayOnTheForm: every error shows beside its field with
// what was typed, and nothing is minted.
func TestKeyFormErrorsStayOnTheForm(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	r := b.postCSRF("/ui/keys/_new", keyFields("name", "typed", "rpm_limit", "sixty", "expires_at", "next week"))
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("unparsable: %d", r.status)
	}
	mustContain(t, "unparsable", r.body, `id="err-rpm_limit"`, "must be a whole number", `value="sixty"`,
		`id="err-expires_at"`, "must be a date and time in UTC", `value="next week"`, `value="typed"`)

	past := time.Now().Add(-time.Hour).UTC().Format(expiresLayout)
	r = b.postCSRF("/ui/keys/_new", keyFields("name", "", "models", "demo\n\nbad model", "tpm_limit", "-5",
		"budget.amount", "ten", "expires_at", past))
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("invalid: %d", r.status)
	}
	mustContain(t, "invalid", r.body, `<code class="code">validation_failed</code>`,
		`id="err-name"`, "is required (1-200 characters)",
		`id="err-models"`, "line 3: ", "demo\n\nbad model</textarea>",
		`id="err-tpm_limit"`, "must be 0 (no limit) or a positive number",
		`id="err-budget.amount"`, `id="err-budget.period"`,
		`id="err-expires_at"`, "must be in the future", `value="`+past+`"`)
	if keys := listKeys(t, h, "default"); len(keys) != 0 {
		t.Fatalf("bad input minted %+v", keys)
	}
}

// TestKeyEditRevokeAndPurge: the edit form changes the allowlist, limits,
// budget and expiry; revoke and purge sit behind confirmations, and the
// Service's refusals show on the page.
func TestKeyEditRevokeAndPurge(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	soon := time.Now().Add(time.Hour).UTC().Truncate(time.Minute)
	k, err := h.svc.CreateVirtualKey(ctx, "default", "default", admin.VirtualKeyInput{Name: "alice", Models: []string{"demo"},
		Budget: &admin.BudgetInput{Amount: "5", Period: "day"}, ExpiresAt: &soon})
	if err != nil {
		t.Fatal(err)
	}
	id := itoa64(k.ID)
	b := h.browser()
	b.login(h.token)
	page := b.get("/ui/keys/" + id + "?org=default&project=default")
	mustContain(t, "detail", page.body, "alice", `value="5"`, `<option value="day" selected>`, `value="`+soon.Format(expiresLayout)+`"`,
		"Revoke key alice ("+k.Prefix+"…)?", "Callers using it get 401")
	testkit.AssertNoSecrets(t, "detail", page.body, k.Secret)

	// The Service's clock moves past the expiry: an edit that leaves the
	// expiry as it was still saves (the past expiry is the key's state,
	// not input).
	h.svc.SetClock(func() time.Time { return time.Now().Add(2 * time.Hour) })
	r := b.postCSRF("/ui/keys/"+id, keyFields("name", "alice", "models", "demo\ndemo/demo-model", "tpm_limit", "1000",
		"budget.amount", "", "budget.period", "", "expires_at", soon.Format(expiresLayout)))
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/keys/"+id+"?done=updated&org=default&project=default" {
		t.Fatalf("edit: %d %q %s", r.status, r.header.Get("Location"), r.body)
	}
	got, _ := h.svc.GetKey(ctx, "default", "default", id)
	if strings.Join(got.Models, ",") != "demo,demo/demo-model" || got.TPMLimit != 1000 || got.Budget != nil || got.ExpiresAt == nil {
		t.Fatalf("after edit %+v", got)
	}
	h.svc.SetClock(time.Now)
	// Clearing the expiry and the allowlist.
	r = b.postCSRF("/ui/keys/"+id, keyFields("name", "alice", "models", "", "expires_at", ""))
	if r.status != http.StatusSeeOther {
		t.Fatalf("clear: %d %s", r.status, r.body)
	}
	if got, _ = h.svc.GetKey(ctx, "default", "default", id); got.ExpiresAt != nil || len(got.Models) != 0 || got.TPMLimit != 0 {
		t.Fatalf("after clearing %+v", got)
	}
	mustContain(t, "list", b.get("/ui/keys").body, "any model", `Keys <span class="count">(1)</span>`)

	// Purging a live key: refused, on the list it was pressed on.
	r = b.postCSRF("/ui/keys/"+id+"/purge?project=default&from=list", keyFields())
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("purge a live key: %d", r.status)
	}
	mustContain(t, "purge a live key", r.body, "only a revoked key can be purged", "key_not_revoked", `<table id="keys-table">`)

	r = b.postCSRF("/ui/keys/"+id+"/revoke?project=default&from=list", keyFields())
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/keys?done=revoked&key=alice&org=default&project=default" {
		t.Fatalf("revoke: %d %q", r.status, r.header.Get("Location"))
	}
	list := b.get(r.header.Get("Location"))
	mustContain(t, "revoked", list.body, "Key <strong>alice</strong> revoked", "show revoked (1)", `Keys <span class="count">(0)</span>`)
	mustNotContain(t, "revoked", list.body, `id="key-`+id+`"`)
	list = b.get("/ui/keys?revoked=show")
	mustContain(t, "show revoked", list.body, `id="key-`+id+`"`, `<span class="status st-off">revoked</span>`, "Delete key alice ("+k.Prefix+"…) for good?")
	// A revoked key cannot be edited.
	r = b.postCSRF("/ui/keys/"+id, keyFields("name", "bob"))
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "key_revoked") {
		t.Fatalf("edit a revoked key: %d", r.status)
	}
	r = b.postCSRF("/ui/keys/"+id+"/purge?project=default", keyFields())
	if r.status != http.StatusSeeOther {
		t.Fatalf("purge: %d %s", r.status, r.body)
	}
	if keys := listKeys(t, h, "default"); len(keys) != 0 {
		t.Fatalf("purged key still listed: %+v", keys)
	}
	if r = b.get("/ui/keys/" + id); r.status != http.StatusNotFound {
		t.Fatalf("purged key's page: %d", r.status)
	}
}

// TestKeysBelongToTheirProject: the project selector picks whose keys are
// listed and minted.
func TestKeysBelongToTheirProject(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	if _, err := h.svc.CreateProject(ctx, "default", admin.ProjectInput{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.CreateVirtualKey(ctx, "default", "other", admin.VirtualKeyInput{Name: "other-key"}); err != nil {
		t.Fatal(err)
	}
	b := h.browser()
	b.login(h.token)
	mustNotContain(t, "default project", b.get("/ui/keys").body, "other-key")
	mustContain(t, "other project", b.get("/ui/keys?project=other").body, "other-key", `<option value="other" selected>`)
	if r := b.postCSRF("/ui/keys/_new", keyFields("project", "other", "name", "minted-in-other")); r.status != http.StatusOK {
		t.Fatalf("mint in other: %d", r.status)
	}
	if keys := listKeys(t, h, "other"); len(keys) != 2 {
		t.Fatalf("keys of other: %+v", keys)
	}
	if r := b.get("/ui/keys?project=nope"); r.status != http.StatusNotFound {
		t.Fatalf("unknown project: %d", r.status)
	}
}

// TestBrowserMintKeySeenExactlyOnce: the secret shows in the dialog with a
// copy button; once the dialog is closed it is nowhere in the page, nor
// after a reload, nor going back and forward, nor in the browser's
// storage.
func TestBrowserMintKeySeenExactlyOnce(t *testing.T) {
	h := newHarness(t, Options{})
	demoLike(t, h)
	ctx := context.Background()
	if _, err := h.svc.CreateVirtualKey(ctx, "default", "default", admin.VirtualKeyInput{Name: "alice", Models: []string{"demo", "demo/demo-model"},
		TPMLimit: 200000, Budget: &admin.BudgetInput{Amount: "25", Period: "week"}}); err != nil {
		t.Fatal(err)
	}
	old, err := h.svc.CreateVirtualKey(ctx, "default", "default", admin.VirtualKeyInput{Name: "old-laptop"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.RevokeVirtualKey(ctx, "default", "default", itoa64(old.ID)); err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, h)
	tb.login(h.token)
	tb.navigate("keys", "/ui/keys", chromedp.Click(chromedp.CSS(`.sidebar a[href^="/ui/keys"]`)), chromedp.WaitVisible(chromedp.CSS(".page-head")))
	tb.navigate("mint form", "/ui/keys/_new", chromedp.Click(chromedp.CSS(`a.btn-primary`)), chromedp.WaitVisible(chromedp.CSS("#name")))
	tb.do("fill", chromedp.SendKeys(chromedp.CSS("#name"), "ci-bot"), chromedp.SendKeys(chromedp.CSS("#models"), "demo"),
		chromedp.SendKeys(chromedp.CSS("#rpm-limit"), "60"))
	tb.do("mint", chromedp.Click(chromedp.CSS(`form button.btn-primary`)), chromedp.WaitVisible(chromedp.CSS("dialog[open] input.secret")))
	secret, err := chromedp.Run(tb.ctx, chromedp.Value(chromedp.CSS("dialog[open] input.secret")))
	if err != nil {
		t.Fatal(err)
	}
	keys := listKeys(t, h, "default")
	if len(keys) != 3 || keys[2].Name != "ci-bot" || !strings.HasPrefix(secret, keys[2].Prefix+"_") {
		t.Fatalf("shown secret %q, keys %+v", secret, keys)
	}
	keys = keys[2:]
	if got := tb.text("dialog[open]"); !strings.Contains(got, "shown only now") || !strings.Contains(got, "copy") {
		t.Fatalf("dialog: %q", got)
	}
	tb.waitFor("list behind the dialog", `!!document.querySelector('#key-`+itoa64(keys[0].ID)+`') && location.pathname === '/ui/keys'`)
	tb.screenshot("keys-minted")
	tb.do("copy", chromedp.Click(chromedp.CSS("dialog[open] button.copy")))
	tb.waitFor("copied", `document.querySelector('dialog[open] button.copy').textContent === 'copied'`)

	nowhere := `(() => { const s = ` + jsString(secret) + `;
		return !document.documentElement.outerHTML.includes(s) && !document.body.innerText.includes(s) &&
			![...document.querySelectorAll('input, textarea')].some(e => e.value.includes(s)) &&
			!JSON.stringify(Object.assign({}, localStorage)).includes(s) &&
			!JSON.stringify(Object.assign({}, sessionStorage)).includes(s); })()`
	tb.do("close", chromedp.Click(chromedp.CSS(`dialog[open] form[method=dialog] button`)))
	tb.waitFor("closed and gone", `!document.querySelector('dialog.modal[data-show-on-load]') && `+nowhere)
	tb.screenshot("keys")
	// Back to the list as it was before the mint, then forward to the
	// entry the mint answered in (the browser may restore either from its
	// back/forward cache, without a load event: hence the history calls
	// and a wait on the address).
	tb.do("back", chromedp.Evaluate[chromedp.Void](`history.back()`))
	tb.waitAfterNav("gone going back", `location.search === '?org=default' && document.readyState === 'complete' && `+nowhere)
	tb.do("forward", chromedp.Evaluate[chromedp.Void](`history.forward()`))
	tb.waitAfterNav("gone going forward", `location.search === '?org=default&project=default' && document.readyState === 'complete' && `+nowhere)
	tb.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#keys-table")))
	tb.waitFor("gone after reload", nowhere)
	tb.do("key page", chromedp.Navigate(h.srv.URL+"/ui/keys/"+itoa64(keys[0].ID)), chromedp.WaitVisible(chromedp.CSS("#name")))
	tb.waitFor("not on the key's page", nowhere)

	// Leaving the page without closing the dialog ends the showing too:
	// coming back (from the back/forward cache or not) shows no secret.
	tb.do("keys again", chromedp.Navigate(h.srv.URL+"/ui/keys/_new"), chromedp.WaitVisible(chromedp.CSS("#name")))
	tb.do("mint another", chromedp.SendKeys(chromedp.CSS("#name"), "left-open"),
		chromedp.Click(chromedp.CSS(`form button.btn-primary`)), chromedp.WaitVisible(chromedp.CSS("dialog[open] input.secret")))
	second, err := chromedp.Run(tb.ctx, chromedp.Value(chromedp.CSS("dialog[open] input.secret")))
	if err != nil || second == secret || !strings.HasPrefix(second, "rk-") {
		t.Fatalf("second secret %q %v", second, err)
	}
	// What the browser does as it leaves (and before it may keep the page
	// in its back/forward cache): the dialog goes.
	tb.do("pagehide", chromedp.Evaluate[chromedp.Void](`window.dispatchEvent(new PageTransitionEvent('pagehide', {persisted: true}))`))
	tb.waitFor("gone on pagehide", `!document.querySelector('dialog.modal[data-show-on-load]') &&
		!document.documentElement.outerHTML.includes(`+jsString(second)+`)`)
	tb.do("leave", chromedp.Navigate(h.srv.URL+"/ui/models"), chromedp.WaitVisible(chromedp.CSS("#models-table")))
	tb.do("come back", chromedp.Evaluate[chromedp.Void](`history.back()`))
	tb.waitAfterNav("gone after leaving", `location.pathname === '/ui/keys' && document.readyState === 'complete' &&
		!document.documentElement.outerHTML.includes(`+jsString(second)+`)`)
	tb.clean()
}
