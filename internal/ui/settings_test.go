package ui

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/fleet"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/testkit"
)

var (
	fleetKeyRe   = regexp.MustCompile(`rf-[A-Za-z0-9_-]{20,}`)
	adminTokenRe = regexp.MustCompile(`ra-[A-Za-z0-9_-]{20,}`)
)

// fleetConfigStatus is what the real fleet endpoint answers a box that
// presents key.
func fleetConfigStatus(t *testing.T, h *harness, key string) int {
	t.Helper()
	srv := httptest.NewServer(fleet.NewHandler(h.db, fleet.HandlerConfig{}, slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+fleetapi.ConfigPath, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestSettingsFleetKeysMintAndRevoke: a fleet key is shown once and works
// at once; the third active key is refused on the form; a revoked key is
// refused by the fleet endpoints.
func TestSettingsFleetKeysMintAndRevoke(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	mint := func(name string) response {
		return b.postCSRF("/ui/settings/fleet-keys", url.Values{"org": {"default"}, "name": {name}})
	}
	r := mint("")
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("no name: %d", r.status)
	}
	mustContain(t, "no name", r.body, `id="err-name"`, "is required (1-200 characters)", "validation_failed")

	r = mint("gpu-template-2026-11")
	if r.status != http.StatusOK {
		t.Fatalf("mint: %d %s", r.status, r.body)
	}
	first := fleetKeyRe.FindString(r.body)
	if first == "" {
		t.Fatalf("no fleet key in:\n%s", r.body)
	}
	mustContain(t, "minted", r.body, "Fleet key gpu-template-2026-11", "ROLTER_FLEET_KEY", "Fleet key <strong>gpu-template-2026-11</strong> minted",
		"(1 of 2 active)")
	if outside := outsideDialog(t, r.body); strings.Contains(outside, first) {
		t.Fatalf("the key shows outside its dialog:\n%s", outside)
	}
	testkit.AssertNoSecrets(t, "settings", b.get("/ui/settings").body, first)
	if got := fleetConfigStatus(t, h, first); got != http.StatusOK {
		t.Fatalf("the new key on /vllm/config: %d", got)
	}
	if r = mint("gpu-template-2026-12"); r.status != http.StatusOK {
		t.Fatalf("second: %d", r.status)
	}
	r = mint("third")
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("third: %d", r.status)
	}
	mustContain(t, "third", r.body, "already has 2 active fleet keys", `<code class="code">fleet_key_limit</code>`, `value="third"`)
	mustNotContain(t, "third", r.body, "data-show-on-load")

	keys, _ := h.svc.ListFleetKeys(context.Background(), "default", admin.PageRequest{})
	id := itoa64(keys.Data[0].ID)
	page := b.get("/ui/settings")
	mustContain(t, "list", page.body, "Revoke fleet key gpu-template-2026-11 ("+keys.Data[0].Prefix+"…)?", "Boxes still using it are refused (401)")
	r = b.postCSRF("/ui/settings/fleet-keys/"+id+"/revoke?name=gpu-template-2026-11", url.Values{"org": {"default"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("revoke: %d", r.status)
	}
	page = b.get(r.header.Get("Location"))
	mustContain(t, "revoked", page.body, "Fleet key <strong>gpu-template-2026-11</strong> revoked", "(1 of 2 active)",
		`<tr id="fleet-key-`+id+`">`, `<span class="status st-off">revoked</span>`)
	if got := fleetConfigStatus(t, h, first); got != http.StatusUnauthorized {
		t.Fatalf("the revoked key on /vllm/config: %d", got)
	}
	// A key that does not exist: the Service's answer, on the page.
	r = b.postCSRF("/ui/settings/fleet-keys/999/revoke", url.Values{"org": {"default"}})
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "not_found") {
		t.Fatalf("revoke a missing key: %d %s", r.status, r.body)
	}
	if r = mint("third"); r.status != http.StatusOK {
		t.Fatalf("mint after revoking: %d", r.status)
	}
}

// TestSettingsAdminTokensMintAndRevoke: a global session mints tokens
// (shown once) and revokes them; an org-scoped session does not see them,
// and its token requests are refused as not found.
func TestSettingsAdminTokensMintAndRevoke(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	page := b.get("/ui/settings")
	mustContain(t, "settings", page.body, "Admin tokens", `<span class="tag">this session</span>`, `<option value="org:default">org default only</option>`)

	// The last global token cannot be revoked, even by its own session.
	mine, err := h.svc.ListTokens(context.Background(), admin.PageRequest{})
	if err != nil || len(mine.Data) != 1 {
		t.Fatalf("tokens %+v %v", mine.Data, err)
	}
	r := b.postCSRF("/ui/settings/tokens/"+itoa64(mine.Data[0].ID)+"/revoke", url.Values{"org": {"default"}})
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("revoke the last global token: %d", r.status)
	}
	mustContain(t, "last token", r.body, "this is the last live global admin token", "last_admin_token")

	mintToken := func(kv ...string) response {
		f := url.Values{"org": {"default"}}
		for i := 0; i+1 < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return b.postCSRF("/ui/settings/tokens", f)
	}
	r = mintToken("name", "typed", "scope", "org:nope", "expires_at", "soon")
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("bad expiry: %d", r.status)
	}
	mustContain(t, "bad expiry", r.body, `id="err-expires_at"`, `value="soon"`, `value="typed"`)
	r = mintToken("name", "typed", "scope", "org:nope")
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("bad scope: %d", r.status)
	}
	mustContain(t, "bad scope", r.body, `id="err-scope.org"`, "names no org", `value="typed"`)

	r = mintToken("name", "ops-default", "scope", "org:default")
	if r.status != http.StatusOK {
		t.Fatalf("mint: %d %s", r.status, r.body)
	}
	orgToken := adminTokenRe.FindString(r.body)
	if orgToken == "" {
		t.Fatalf("no token in:\n%s", r.body)
	}
	mustContain(t, "minted", r.body, "Admin token ops-default", "Admin token <strong>ops-default</strong> minted", ">org default</td>")
	if outside := outsideDialog(t, r.body); strings.Contains(outside, orgToken) {
		t.Fatalf("the token shows outside its dialog:\n%s", outside)
	}
	testkit.AssertNoSecrets(t, "settings", b.get("/ui/settings").body, orgToken)

	// The org token logs in: fleet keys only, and the token endpoints
	// answer not found.
	ob := h.browser()
	ob.login(orgToken)
	page = ob.get("/ui/settings")
	if page.status != http.StatusOK {
		t.Fatalf("org session's settings: %d", page.status)
	}
	mustContain(t, "org session", page.body, "Fleet keys", "Mint a fleet key")
	mustNotContain(t, "org session", page.body, "Admin tokens", "Mint an admin token", "tokens-table")
	csrf := csrfRe.FindStringSubmatch(page.body)[1]
	for _, p := range []string{"/ui/settings/tokens", "/ui/settings/tokens/" + itoa64(mine.Data[0].ID) + "/revoke"} {
		r = ob.post(p, url.Values{"org": {"default"}, "csrf": {csrf}, "name": {"escalate"}, "scope": {"global"}})
		if r.status != http.StatusNotFound {
			t.Fatalf("org session POST %s: %d", p, r.status)
		}
	}
	if all, _ := h.svc.ListTokens(context.Background(), admin.PageRequest{}); len(all.Data) != 2 || all.Data[0].RevokedAt != nil {
		t.Fatalf("the org session changed tokens: %+v", all.Data)
	}

	// Revoking the org token logs its session out.
	tokens, _ := h.svc.ListTokens(context.Background(), admin.PageRequest{})
	id := itoa64(tokens.Data[1].ID)
	page = b.get("/ui/settings")
	mustContain(t, "revoke dialog", page.body, "Revoke admin token ops-default (org default)?")
	r = b.postCSRF("/ui/settings/tokens/"+id+"/revoke", url.Values{"org": {"default"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	mustContain(t, "revoked", b.get(r.header.Get("Location")).body, "Admin token <strong>ops-default</strong> revoked",
		`<tr id="token-`+id+`">`, `<span class="status st-off">revoked</span>`)
	if r = ob.get("/ui/settings"); r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/ui/login") {
		t.Fatalf("the revoked token's session: %d %q", r.status, r.header.Get("Location"))
	}
}

// TestBrowserSettingsFleetKeyShownOnce: the fleet key minted from the
// page shows in its dialog and is gone once the dialog is closed.
func TestBrowserSettingsFleetKeyShownOnce(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	old, err := h.svc.CreateFleetKey(ctx, "default", admin.FleetKeyInput{Name: "gpu-template-2026-10"})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.svc.RevokeFleetKey(ctx, "default", itoa64(old.ID)); err != nil {
		t.Fatal(err)
	}
	h.mintTokenView(`{"org":"default"}`)
	tb := newTab(t, h)
	tb.login(h.token)
	tb.navigate("settings", "/ui/settings", chromedp.Click(chromedp.CSS(`.sidebar a[href^="/ui/settings"]`)), chromedp.WaitVisible(chromedp.CSS("#tokens-table")))
	tb.do("mint", chromedp.SendKeys(chromedp.CSS("#fleet-key-name"), "gpu-template-2026-11"),
		chromedp.Click(chromedp.CSS(`#fleet-keys form button.btn-primary`)), chromedp.WaitVisible(chromedp.CSS("dialog[open] input.secret")))
	key, err := chromedp.Run(tb.ctx, chromedp.Value(chromedp.CSS("dialog[open] input.secret")))
	if err != nil || !strings.HasPrefix(key, "rf-") {
		t.Fatalf("shown key %q %v", key, err)
	}
	tb.do("close", chromedp.Click(chromedp.CSS(`dialog[open] form[method=dialog] button`)))
	tb.waitFor("gone", `!document.querySelector('dialog.modal[data-show-on-load]') && !document.documentElement.outerHTML.includes(`+jsString(key)+`)`)
	if got := tb.text("#fleet-keys-table"); !strings.Contains(got, "gpu-template-2026-11") || !strings.Contains(got, "revoked") {
		t.Fatalf("fleet keys: %q", got)
	}
	tb.screenshot("settings")
	tb.clean()
}
