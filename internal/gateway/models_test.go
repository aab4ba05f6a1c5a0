package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/rolter/rolter/internal/store"
)

// modelsHarness has every address kind: routes, provider-slug/model pins
// and group-slug/model addresses, most of them with a slash in the id.
func modelsHarness(t *testing.T) *harness {
	h := newHarness(t, Config{})
	ctx := context.Background()
	p1 := &store.Provider{OrgID: h.org.ID, Slug: "vllm-msk", Name: "a", Kind: "vllm", BaseURL: "http://127.0.0.1:1/v1", MetadataSource: "configured", Models: []string{"llama"}}
	must(t, h.db.CreateProvider(ctx, p1))
	p2 := h.provider("vllm-spb", "http://127.0.0.1:2/v1", store.ProviderSettings{})
	h.route("qwen3", "", store.Target{ProviderID: p1.ID, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1}, store.Target{ProviderID: p2, Weight: 1})
	h.group("cluster", "", store.GroupMember{ProviderID: p1.ID, Weight: 1, ModelMap: map[string]string{"big": "Qwen/Qwen3-8B"}}, store.GroupMember{ProviderID: p2, Weight: 1})
	return h
}

func (h *harness) get(path, key string) (*http.Response, string) {
	h.t.Helper()
	req, _ := http.NewRequest("GET", h.srv.URL+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	must(h.t, err)
	return resp, readAll(h.t, resp)
}

// Every entry of the list is retrievable by its id, as the same bytes,
// whether the id's slashes are sent as they are or escaped.
func TestModelRetrieveIsTheListEntry(t *testing.T) {
	h := modelsHarness(t)
	_, body := h.get("/v1/models", h.key)
	var list struct {
		Data []json.RawMessage `json:"data"`
	}
	must(t, json.Unmarshal([]byte(body), &list))
	slashed := 0
	for _, raw := range list.Data {
		var e modelEntry
		must(t, json.Unmarshal(raw, &e))
		if strings.Contains(e.ID, "/") {
			slashed++
		}
		for _, path := range []string{"/v1/models/" + e.ID, "/v1/models/" + url.PathEscape(e.ID)} {
			resp, got := h.get(path, h.key)
			if resp.StatusCode != 200 || !bytes.Equal(bytes.TrimSpace([]byte(got)), raw) {
				t.Fatalf("GET %s: %d\n got %s\nwant %s", path, resp.StatusCode, got, raw)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("GET %s: Content-Type %q", path, ct)
			}
		}
	}
	if len(list.Data) < 8 || slashed < 6 {
		t.Fatalf("the fixture should list every kind, most with slashes: %d entries, %d with a slash", len(list.Data), slashed)
	}
}

func TestModelRetrieveNotFound(t *testing.T) {
	h := modelsHarness(t)
	narrow := h.newKey([]string{"cluster/*"}, nil)
	for _, c := range []struct{ path, key string }{
		{"/v1/models/nope", h.key},
		{"/v1/models/vllm-msk/nope", h.key},
		{"/v1/models/", h.key},
		{"/v1/models/" + strings.Repeat("x", 4000), h.key},
		// The allowlist hides a model like the list does: the same 404
		// as for one that does not exist.
		{"/v1/models/qwen3", narrow},
		{"/v1/models/vllm-msk/llama", narrow},
	} {
		resp, body := h.get(c.path, c.key)
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    string  `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &e); err != nil || resp.StatusCode != 404 ||
			e.Error.Code != "model_not_found" || e.Error.Type != "invalid_request_error" || e.Error.Message == "" {
			t.Fatalf("GET %.60s: %d %s", c.path, resp.StatusCode, body)
		}
		if len(body) > 400 {
			t.Fatalf("the message should quote at most a bounded part of the id: %d bytes", len(body))
		}
	}
	if resp, body := h.get("/v1/models/cluster/llama", narrow); resp.StatusCode != 200 || !strings.Contains(body, `"id":"cluster/llama"`) {
		t.Fatalf("an allowed model: %d %s", resp.StatusCode, body)
	}
	if resp, body := h.get("/v1/models/qwen3", ""); resp.StatusCode != 401 || !strings.Contains(body, `"code":"unauthorized"`) {
		t.Fatalf("no key: %d %s", resp.StatusCode, body)
	}
}

// A route named like an address shadows it, in the list and in retrieve.
func TestModelRetrieveRouteShadowsAddress(t *testing.T) {
	h := modelsHarness(t)
	p := h.provider("other", "http://127.0.0.1:3/v1", store.ProviderSettings{})
	h.route("cluster/big", "", store.Target{ProviderID: p, Weight: 1})
	_, list := h.get("/v1/models", h.key)
	if n := strings.Count(list, `"id":"cluster/big"`); n != 1 {
		t.Fatalf("cluster/big listed %d times: %s", n, list)
	}
	resp, body := h.get("/v1/models/cluster/big", h.key)
	var e modelEntry
	must(t, json.Unmarshal([]byte(body), &e))
	if resp.StatusCode != 200 || e.AddressKind != "route" {
		t.Fatalf("retrieve: %d %s", resp.StatusCode, body)
	}
}

// The official OpenAI SDK's models.retrieve decodes the entry, and its
// error type carries the 404's code.
func TestModelRetrieveOpenAISDK(t *testing.T) {
	h := modelsHarness(t)
	c := openai.NewClient(ooption.WithBaseURL(h.srv.URL+"/v1/"), ooption.WithAPIKey(h.key), ooption.WithMaxRetries(0))
	for _, id := range []string{"qwen3", "vllm-msk/llama", "cluster/Qwen/Qwen3-8B"} {
		m, err := c.Models.Get(context.Background(), id)
		if err != nil {
			t.Fatalf("retrieve %s: %v", id, err)
		}
		if m.ID != id || m.OwnedBy == "" || m.Object != "model" {
			t.Fatalf("retrieve %s: %+v", id, m)
		}
	}
	_, err := c.Models.Get(context.Background(), "vllm-msk/nope")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "model_not_found" {
		t.Fatalf("retrieve of an unknown model: %v", err)
	}
}
