package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// echo is an upstream that answers with the model it was sent and counts.
type echo struct {
	*upstream
	hits atomic.Int64
}

func newEcho(t *testing.T, name string) *echo {
	e := &echo{}
	e.upstream = newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		e.hits.Add(1)
		w.Header().Set("X-Served-By", name)
		var req struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(body, &req)
		_, _ = io.WriteString(w, `{"model":"`+req.Model+`","served_by":"`+name+`"}`)
	})
	return e
}

func (h *harness) group(slug, strategy string, members ...store.GroupMember) {
	must(h.t, h.db.CreateGroup(context.Background(), &store.Group{OrgID: h.org.ID, Slug: slug, Name: slug, Strategy: strategy, Members: members}))
	h.reload()
}

// call sends a chat request and returns status, the serving upstream and
// the model that upstream received.
func (h *harness) call(model string, hdr ...string) (status int, servedBy, upstreamModel, body string) {
	h.t.Helper()
	resp := h.post("/v1/chat/completions", `{"model":"`+model+`"}`, hdr...)
	body = readAll(h.t, resp)
	// The echo names itself in its body: its response headers stay at
	// the gateway (an allowlist, scenario 31).
	var served struct {
		ServedBy string `json:"served_by"`
	}
	_ = json.Unmarshal([]byte(body), &served)
	return resp.StatusCode, served.ServedBy, resp.Header.Get("X-Rolter-Upstream-Model"), body
}

func TestPrecedenceAndPinning(t *testing.T) {
	onEveryStore(t, func(t *testing.T, h *harness) {
		msk, spb := newEcho(t, "msk"), newEcho(t, "spb")
		a := h.provider("vllm-msk", msk.base(), store.ProviderSettings{})
		b := h.provider("vllm-spb", spb.base(), store.ProviderSettings{})
		// A route literally named like a provider address wins over the provider.
		h.route("vllm-spb/qwen3", "", store.Target{ProviderID: a, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1})
		if st, by, um, body := h.call("vllm-spb/qwen3"); st != 200 || by != "msk" || um != "Qwen/Qwen3-8B" || !strings.Contains(body, `"model":"vllm-spb/qwen3"`) {
			t.Fatalf("route precedence: %d %s %s %s", st, by, um, body)
		}
		// Without a route, slug/model pins the provider; the right part is the
		// upstream model, split on the first slash only.
		if st, by, um, body := h.call("vllm-spb/Qwen/Qwen3-8B"); st != 200 || by != "spb" || um != "Qwen/Qwen3-8B" || !strings.Contains(body, `"model":"vllm-spb/Qwen/Qwen3-8B"`) {
			t.Fatalf("provider pin: %d %s %s %s", st, by, um, body)
		}
		for _, m := range []string{"unknown/qwen3", "vllm-spb/", "qwen3"} {
			if st, _, _, body := h.call(m); st != 404 || !strings.Contains(body, `"code":"model_not_found"`) || !strings.Contains(body, "/v1/models") {
				t.Fatalf("%s: %d %s", m, st, body)
			}
		}
		recs := h.usage.all()
		if recs[1].AddressKind != "provider" || recs[1].ProviderSlug != "vllm-spb" || recs[0].AddressKind != "route" {
			t.Fatalf("usage address kinds: %+v", recs[:2])
		}
		_ = b
	})
}

func TestPinnedProviderNeverFallsBack(t *testing.T) {
	onEveryStore(t, func(t *testing.T, h *harness) {
		msk, spb := newEcho(t, "msk"), newEcho(t, "spb")
		a := h.provider("vllm-msk", msk.base(), store.ProviderSettings{})
		b := h.provider("vllm-spb", spb.base(), store.ProviderSettings{})
		h.group("cluster", "", store.GroupMember{ProviderID: a, Weight: 1}, store.GroupMember{ProviderID: b, Weight: 1})
		h.gw.state(targetID{b, "qwen3"}, false).breaker.RateLimited(30 * time.Second)
		resp := h.post("/v1/chat/completions", `{"model":"vllm-spb/qwen3"}`)
		body := readAll(t, resp)
		if resp.StatusCode != 503 || !strings.Contains(body, "cooling down") || resp.Header.Get("Retry-After") != "30" {
			t.Fatalf("pinned to a cooling provider: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		if msk.hits.Load()+spb.hits.Load() != 0 {
			t.Fatalf("pinned request reached an upstream: msk %d spb %d", msk.hits.Load(), spb.hits.Load())
		}
		// The group still serves through the other member.
		if st, by, _, _ := h.call("cluster/qwen3"); st != 200 || by != "msk" {
			t.Fatalf("group with a cooling member: %d %s", st, by)
		}
	})
}

func TestGroupFanOut(t *testing.T) {
	h := newHarness(t, Config{})
	e1, e2, e3 := newEcho(t, "one"), newEcho(t, "two"), newEcho(t, "three")
	p1 := h.provider("vllm-1", e1.base(), store.ProviderSettings{})
	p2 := h.provider("vllm-2", e2.base(), store.ProviderSettings{})
	p3 := h.provider("vllm-3", e3.base(), store.ProviderSettings{})
	// Overlapping groups: vllm-1 is in both.
	h.group("vllm-cluster-all", "weighted",
		store.GroupMember{ProviderID: p1, Weight: 3, ModelMap: map[string]string{"qwen3": "Qwen/Qwen3-8B"}},
		store.GroupMember{ProviderID: p2, Weight: 1})
	h.group("vllm-cluster-msk", "weighted", store.GroupMember{ProviderID: p1, Weight: 1}, store.GroupMember{ProviderID: p3, Weight: 1})
	const n = 10000
	for range n {
		if st, by, um, _ := h.call("vllm-cluster-all/qwen3"); st != 200 ||
			(by == "one" && um != "Qwen/Qwen3-8B") || (by == "two" && um != "qwen3") {
			t.Fatalf("group call: %d %s %s", st, by, um)
		}
	}
	if e3.hits.Load() != 0 {
		t.Fatal("a non-member was called")
	}
	share := float64(e1.hits.Load()) / n
	if share < 0.72 || share > 0.78 {
		t.Fatalf("member weights 3:1 split %d/%d (%.3f)", e1.hits.Load(), e2.hits.Load(), share)
	}
	if st, by, _, _ := h.call("vllm-cluster-msk/llama"); st != 200 || (by != "one" && by != "three") {
		t.Fatalf("second group: %d %s", st, by)
	}
}

func TestGroupSkipsMembersThatDoNotServeTheModel(t *testing.T) {
	h := newHarness(t, Config{})
	e1, e2 := newEcho(t, "one"), newEcho(t, "two")
	ctx := context.Background()
	p1 := &store.Provider{OrgID: h.org.ID, Slug: "one", Name: "one", Kind: "vllm", BaseURL: e1.base(), MetadataSource: "configured", Models: []string{"llama"}}
	must(t, h.db.CreateProvider(ctx, p1))
	p2 := h.provider("two", e2.base(), store.ProviderSettings{})
	h.group("g", "", store.GroupMember{ProviderID: p1.ID, Weight: 100}, store.GroupMember{ProviderID: p2, Weight: 1})
	for range 20 {
		if st, by, _, _ := h.call("g/qwen3"); st != 200 || by != "two" {
			t.Fatalf("g/qwen3 went to %s (%d)", by, st)
		}
	}
}

func TestProviderHeaderPinsRouteTargets(t *testing.T) {
	h := newHarness(t, Config{})
	msk, spb, other := newEcho(t, "msk"), newEcho(t, "spb"), newEcho(t, "other")
	a := h.provider("vllm-msk", msk.base(), store.ProviderSettings{})
	b := h.provider("vllm-spb", spb.base(), store.ProviderSettings{})
	h.provider("elsewhere", other.base(), store.ProviderSettings{})
	h.route("qwen3", "", store.Target{ProviderID: a, Weight: 100}, store.Target{ProviderID: b, Weight: 1})
	for range 10 {
		if st, by, _, _ := h.call("qwen3", "X-Rolter-Provider", "vllm-spb"); st != 200 || by != "spb" {
			t.Fatalf("pinned route: %d %s", st, by)
		}
	}
	st, _, _, body := h.call("qwen3", "X-Rolter-Provider", "elsewhere")
	if st != 400 || !strings.Contains(body, `"code":"provider_not_in_route"`) {
		t.Fatalf("pin outside the route: %d %s", st, body)
	}
}

func TestOrgIsolation(t *testing.T) {
	onEveryStore(t, func(t *testing.T, h *harness) {
		ours, theirs := newEcho(t, "ours"), newEcho(t, "theirs")
		h.provider("vllm", ours.base(), store.ProviderSettings{})
		// A second org with its own provider "vllm" and its own key.
		ctx := context.Background()
		o2 := &store.Org{Name: "other"}
		must(t, h.db.CreateOrg(ctx, o2))
		p2 := &store.Project{OrgID: o2.ID, Name: "default"}
		must(t, h.db.CreateProject(ctx, p2))
		must(t, h.db.CreateProvider(ctx, &store.Provider{OrgID: o2.ID, Slug: "vllm", Name: "vllm", Kind: "vllm", BaseURL: theirs.base(), MetadataSource: "configured"}))
		must(t, h.db.CreateGroup(ctx, &store.Group{OrgID: o2.ID, Slug: "their-group", Name: "g", Strategy: "weighted"}))
		tok, lookup := secret.Mint(secret.PrefixVirtualKey)
		must(t, h.db.CreateVirtualKey(ctx, &store.VirtualKey{ProjectID: p2.ID, Name: "k", Lookup: lookup, Hash: secret.HashOf(tok.Reveal())}))
		h.reload()
		for range 5 {
			if st, by, _, _ := h.call("vllm/qwen3"); st != 200 || by != "ours" {
				t.Fatalf("our key: %d %s", st, by)
			}
		}
		mine := h.key
		h.key = tok.Reveal()
		for range 5 {
			if st, by, _, _ := h.call("vllm/qwen3"); st != 200 || by != "theirs" {
				t.Fatalf("their key: %d %s", st, by)
			}
		}
		h.key = mine
		if st, _, _, _ := h.call("their-group/qwen3"); st != 404 {
			t.Fatalf("another org's group resolved: %d", st)
		}
	})
}

func TestAllowlistMatchesTheAddress(t *testing.T) {
	h := newHarness(t, Config{})
	e := newEcho(t, "e")
	p := h.provider("vllm", e.base(), store.ProviderSettings{})
	h.route("qwen3", "", store.Target{ProviderID: p, Weight: 1})
	h.key = h.newKey([]string{"vllm/*"}, nil)
	if st, _, _, _ := h.call("vllm/llama"); st != 200 {
		t.Fatalf("vllm/* should allow vllm/llama: %d", st)
	}
	if st, _, _, _ := h.call("qwen3"); st != 403 {
		t.Fatalf("route outside the allowlist: %d", st)
	}
}

func TestModelsListsEveryAddressKind(t *testing.T) {
	onEveryStore(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		p1 := &store.Provider{OrgID: h.org.ID, Slug: "vllm-msk", Name: "a", Kind: "vllm", BaseURL: "http://127.0.0.1:1/v1", MetadataSource: "configured", Models: []string{"llama"}}
		must(t, h.db.CreateProvider(ctx, p1))
		p2 := h.provider("vllm-spb", "http://127.0.0.1:2/v1", store.ProviderSettings{})
		deleted := h.provider("gone", "http://127.0.0.1:3/v1", store.ProviderSettings{})
		h.route("qwen3", "", store.Target{ProviderID: p1.ID, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1}, store.Target{ProviderID: p2, Weight: 1})
		h.route("fast", "", store.Target{ProviderID: p2, UpstreamModel: "Qwen/Qwen3-0.6B", Weight: 1})
		h.group("cluster", "", store.GroupMember{ProviderID: p1.ID, Weight: 1, ModelMap: map[string]string{"big": "Qwen/Qwen3-8B"}}, store.GroupMember{ProviderID: p2, Weight: 1})
		must(t, h.db.SoftDeleteProvider(ctx, deleted, time.Now()))
		h.reload()

		list := func() map[string]string {
			req, _ := http.NewRequest("GET", h.srv.URL+"/v1/models", nil)
			req.Header.Set("Authorization", "Bearer "+h.key)
			resp, err := http.DefaultClient.Do(req)
			must(t, err)
			var out struct {
				Data []modelEntry `json:"data"`
			}
			must(t, json.Unmarshal([]byte(readAll(t, resp)), &out))
			got := map[string]string{}
			for _, m := range out.Data {
				if m.OwnedBy == "" {
					t.Fatalf("entry without owned_by: %+v", m)
				}
				got[m.ID] = m.AddressKind
			}
			return got
		}
		want := map[string]string{
			"qwen3": "route", "fast": "route",
			"vllm-msk/llama": "provider", "vllm-msk/Qwen/Qwen3-8B": "provider",
			"vllm-spb/qwen3": "provider", "vllm-spb/Qwen/Qwen3-0.6B": "provider",
			"cluster/llama": "group", "cluster/Qwen/Qwen3-8B": "group", "cluster/qwen3": "group",
			"cluster/Qwen/Qwen3-0.6B": "group", "cluster/big": "group",
		}
		got := list()
		if len(got) != len(want) {
			keys := make([]string, 0, len(got))
			for k := range got {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			t.Fatalf("models: %v", keys)
		}
		for id, kind := range want {
			if got[id] != kind {
				t.Fatalf("models[%s] = %q, want %q (all: %v)", id, got[id], kind, got)
			}
		}
		// The allowlist filters the list too.
		h.key = h.newKey([]string{"cluster/*", "fast"}, nil)
		for id := range list() {
			if id != "fast" && !strings.HasPrefix(id, "cluster/") {
				t.Fatalf("allowlist let %s through", id)
			}
		}
	})
}
