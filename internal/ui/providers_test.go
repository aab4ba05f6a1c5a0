package ui

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/testkit"
)

func providerFields(kv ...string) url.Values {
	f := url.Values{"org": {"default"}, "kind": {"vllm"}, "metadata_source": {"configured"}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Set(kv[i], kv[i+1])
	}
	return f
}

func TestProviderCreateListAndDetail(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	const key = "sk-ui-test-4b1d8c0e9f"
	r := b.postCSRF("/ui/providers/_new", providerFields("name", "vLLM Moscow", "base_url", "http://10.0.0.5:8000/v1",
		"models", "qwen3\nllama-3", "context_limit", "32768", "key_secret", key, "keys[0].weight", "3", "policy.tools", "deny"))
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/providers/vllm-moscow?done=created&org=default" {
		t.Fatalf("create: %d %q %s", r.status, r.header.Get("Location"), r.body)
	}
	p, err := h.svc.GetProvider(context.Background(), "default", "vllm-moscow")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "vLLM Moscow" || p.ContextLimit != 32768 || len(p.Models) != 2 || len(p.Keys) != 1 || p.Keys[0].Weight != 3 || p.Policy.Tools != "deny" {
		t.Fatalf("stored %+v", p)
	}
	list := b.get("/ui/providers")
	mustContain(t, "list", list.body, "Providers <span class=\"count\">(1)</span>", `href="/ui/providers/vllm-moscow?org=default"`, "vLLM Moscow", "qwen3, llama-3")
	detail := b.get("/ui/providers/vllm-moscow?org=default&done=created")
	mustContain(t, "detail", detail.body, "Provider created.", "Key pool <span class=\"count\">(1)</span>", "#"+itoa64(p.Keys[0].ID),
		`value="vLLM Moscow"`, "Delete provider vllm-moscow?", "Callers using vllm-moscow/… will get 404")
	for name, page := range map[string]string{"list": list.body, "detail": detail.body} {
		testkit.AssertNoSecrets(t, name, page, key)
	}
}

func TestProviderFormShowsErrorsNextToFieldsAndKeepsInput(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	r := b.postCSRF("/ui/providers/_new", providerFields("name", "Typed Name", "base_url", "ftp://nowhere", "context_limit", "lots",
		"models", "kept-model", "key_secret", "sk-never-echoed-123"))
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("unparsable number: %d", r.status)
	}
	mustContain(t, "parse error", r.body, `id="err-context_limit"`, "must be a whole number", `value="Typed Name"`, "kept-model", `value="lots"`)
	testkit.AssertNoSecrets(t, "form", r.body, "sk-never-echoed-123")
	// The service's own validation: its code and message beside the field.
	r = b.postCSRF("/ui/providers/_new", providerFields("name", "Typed Name", "base_url", "ftp://nowhere", "models", "kept-model"))
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("invalid base_url: %d", r.status)
	}
	mustContain(t, "validation", r.body, `id="err-base_url"`, "must be an absolute http:// or https:// URL",
		`<code class="code">validation_failed</code>`, `value="Typed Name"`, `value="ftp://nowhere"`, "kept-model")
	ps, _ := h.svc.ListProviders(context.Background(), "default", admin.PageRequest{})
	if len(ps.Data) != 0 {
		t.Fatalf("bad input created %v", ps.Data)
	}
}

func TestProviderSlugConflictOffersTheSuggestion(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	if _, err := h.svc.CreateProvider(context.Background(), "default", admin.ProviderInput{Name: "vllm", Kind: "vllm", BaseURL: "http://10.0.0.5/v1"}); err != nil {
		t.Fatal(err)
	}
	// The pre-check as the operator types.
	r := b.get("/ui/slug-check?org=default&slug=vllm")
	mustContain(t, "taken", r.body, "taken", `data-fill-target="slug" data-fill-value="vllm-2"`)
	r = b.get("/ui/slug-check?org=default&slug=vllm-2")
	mustContain(t, "free", r.body, "available")
	r = b.get("/ui/slug-check?org=default&name=VLLM")
	mustContain(t, "derived", r.body, "taken", "from the name", `data-fill-value="vllm-2"`)
	r = b.get("/ui/slug-check?org=default&slug=Bad_Slug")
	mustContain(t, "invalid", r.body, "must match", "validation_failed")
	r = b.get("/ui/slug-check?org=default&slug=vllm&current=vllm")
	mustContain(t, "current", r.body, "the current slug")
	// Submitting anyway: 409 from the service, shown on the slug field.
	r = b.postCSRF("/ui/providers/_new", providerFields("name", "vllm", "base_url", "http://10.0.0.6/v1"))
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("taken slug: %d", r.status)
	}
	mustContain(t, "conflict", r.body, "slug_taken", `data-fill-value="vllm-2"`, `value="http://10.0.0.6/v1"`)
	r = b.postCSRF("/ui/providers/_new", providerFields("name", "vllm", "slug", "vllm-2", "base_url", "http://10.0.0.6/v1"))
	if r.status != http.StatusSeeOther {
		t.Fatalf("suggested slug: %d %s", r.status, r.body)
	}
}

func TestProviderSlugChangeNeedsExplicitConfirmation(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	if _, err := h.svc.CreateProvider(context.Background(), "default", admin.ProviderInput{Name: "old", Kind: "vllm", BaseURL: "http://10.0.0.5/v1"}); err != nil {
		t.Fatal(err)
	}
	edit := func(kv ...string) response {
		return b.postCSRF("/ui/providers/old", providerFields(append([]string{"name", "old", "base_url", "http://10.0.0.5/v1"}, kv...)...))
	}
	r := edit("slug", "new-slug")
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("slug change without allowing it: %d", r.status)
	}
	mustContain(t, "immutable", r.body, "slug_immutable", `value="new-slug"`)
	r = edit("slug", "new-slug", "allow_slug_change", "on", "confirm_slug", "new-slg")
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("mistyped confirmation: %d", r.status)
	}
	mustContain(t, "confirm", r.body, `id="err-confirm_slug"`, "type the new slug again")
	if _, err := h.svc.GetProvider(context.Background(), "default", "old"); err != nil {
		t.Fatal("refused slug change changed the provider")
	}
	r = edit("slug", "new-slug", "allow_slug_change", "on", "confirm_slug", "new-slug")
	if r.status != http.StatusSeeOther {
		t.Fatalf("confirmed slug change: %d %s", r.status, r.body)
	}
	r = b.get(r.header.Get("Location"))
	mustContain(t, "changed", r.body, "Slug changed", "<code>old/…</code> no longer resolve", "<code>new-slug/…</code>")
}

func TestProviderKeyPoolDeleteAndPurge(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	b := h.browser()
	b.login(h.token)
	if _, err := h.svc.CreateProvider(ctx, "default", admin.ProviderInput{Name: "pool", Kind: "vllm", BaseURL: "http://10.0.0.5/v1"}); err != nil {
		t.Fatal(err)
	}
	const key = "sk-pool-key-93a7f1"
	if r := b.postCSRF("/ui/providers/pool/keys", url.Values{"org": {"default"}, "weight": {"nope"}, "secret": {key}}); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("bad weight: %d", r.status)
	} else {
		mustContain(t, "bad weight", r.body, `id="err-weight"`)
		testkit.AssertNoSecrets(t, "bad weight", r.body, key)
	}
	if r := b.postCSRF("/ui/providers/pool/keys", url.Values{"org": {"default"}, "weight": {"1"}}); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("missing secret: %d", r.status)
	} else {
		mustContain(t, "missing secret", r.body, `id="err-secret"`, "is required")
	}
	if r := b.postCSRF("/ui/providers/pool/keys", url.Values{"org": {"default"}, "weight": {"5"}, "secret": {key}}); r.status != http.StatusSeeOther {
		t.Fatalf("add key: %d %s", r.status, r.body)
	}
	p, _ := h.svc.GetProvider(ctx, "default", "pool")
	if len(p.Keys) != 1 || p.Keys[0].Weight != 5 {
		t.Fatalf("keys %+v", p.Keys)
	}
	page := b.get("/ui/providers/pool?org=default&done=key-added")
	mustContain(t, "key added", page.body, "Key added", "Remove key #"+itoa64(p.Keys[0].ID)+" of pool?")
	testkit.AssertNoSecrets(t, "provider page", page.body, key)
	// Reweight in place; a bad weight is shown and changes nothing.
	weightURL := "/ui/providers/pool/keys/" + itoa64(p.Keys[0].ID) + "/weight"
	if r := b.postCSRF(weightURL, url.Values{"org": {"default"}, "weight": {"-3"}}); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("negative weight: %d", r.status)
	} else {
		mustContain(t, "negative weight", r.body, "validation_failed")
	}
	if r := b.postCSRF(weightURL, url.Values{"org": {"default"}, "weight": {"9"}}); r.status != http.StatusSeeOther {
		t.Fatalf("set weight: %d %s", r.status, r.body)
	}
	if p, _ = h.svc.GetProvider(ctx, "default", "pool"); len(p.Keys) != 1 || p.Keys[0].Weight != 9 {
		t.Fatalf("keys after the weight change %+v", p.Keys)
	}
	mustContain(t, "weight set", b.get("/ui/providers/pool?org=default&done=key-weight").body, "Key weight set", `value="9"`)
	if r := b.postCSRF("/ui/providers/pool/keys/"+itoa64(p.Keys[0].ID)+"/delete", url.Values{"org": {"default"}}); r.status != http.StatusSeeOther {
		t.Fatalf("remove key: %d", r.status)
	}
	if p, _ = h.svc.GetProvider(ctx, "default", "pool"); len(p.Keys) != 0 {
		t.Fatalf("key not removed: %+v", p.Keys)
	}
	if r := b.postCSRF("/ui/providers/pool/delete", url.Values{"org": {"default"}}); r.status != http.StatusSeeOther {
		t.Fatalf("soft delete: %d", r.status)
	}
	list := b.get("/ui/providers?org=default&done=deleted")
	mustContain(t, "deleted", list.body, "slug stays reserved", `<span class="status st-off">deleted</span>`, "Providers <span class=\"count\">(0)</span>")
	// Deleting again is refused with the service's reason, on the page.
	r := b.postCSRF("/ui/providers/pool/delete", url.Values{"org": {"default"}})
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("second delete: %d", r.status)
	}
	mustContain(t, "second delete", r.body, "already deleted", "not_found")
	if r := b.postCSRF("/ui/providers/pool/purge", url.Values{"org": {"default"}}); r.status != http.StatusSeeOther {
		t.Fatalf("purge: %d", r.status)
	}
	if _, err := h.svc.GetProvider(ctx, "default", "pool"); err == nil {
		t.Fatal("purged provider still there")
	}
	if r := b.get("/ui/providers/pool"); r.status != http.StatusNotFound {
		t.Fatalf("purged provider page: %d", r.status)
	}
}

func TestProviderPurgeInUseShowsTheReason(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	if _, err := h.svc.CreateProvider(ctx, "default", admin.ProviderInput{Name: "used", Kind: "vllm", BaseURL: "http://10.0.0.5/v1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.CreateRoute(ctx, "default", "default", admin.RouteInput{Model: "r", Targets: []admin.TargetInput{{Provider: "used"}}}); err != nil {
		t.Fatal(err)
	}
	b := h.browser()
	b.login(h.token)
	r := b.postCSRF("/ui/providers/used/purge", url.Values{"org": {"default"}})
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, "in_use") {
		t.Fatalf("purge of a routed provider: %d %s", r.status, r.body)
	}
	if _, err := h.svc.GetProvider(ctx, "default", "used"); err != nil {
		t.Fatal("refused purge removed the provider")
	}
}
