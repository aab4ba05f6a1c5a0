package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rolter/rolter/internal/store"
)

// strictEngine is a vLLM that serves only the models it lists: a request
// for another answers 404 with vLLM's NotFoundError, naming the model.
type strictEngine struct {
	*upstream
	mu     sync.Mutex
	models []string
	gen    atomic.Int64 // generation requests received
}

func newStrictEngine(t *testing.T, models ...string) *strictEngine {
	e := &strictEngine{models: models}
	e.upstream = newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		e.mu.Lock()
		served := slices.Clone(e.models)
		e.mu.Unlock()
		switch r.URL.Path {
		case "/health":
			return
		case "/v1/models":
			var cards []string
			for _, m := range served {
				cards = append(cards, fmt.Sprintf(`{"id":%q,"object":"model","max_model_len":4096}`, m))
			}
			_, _ = io.WriteString(w, `{"object":"list","data":[`+strings.Join(cards, ",")+`]}`)
			return
		}
		e.gen.Add(1)
		var req struct {
			Model string `json:"model"`
		}
		_ = json.Unmarshal(body, &req)
		if !slices.Contains(served, req.Model) {
			w.WriteHeader(404)
			fmt.Fprintf(w, `{"object":"error","message":"The model %s does not exist.","type":"NotFoundError","param":null,"code":404}`, "`"+req.Model+"`")
			return
		}
		_, _ = io.WriteString(w, `{"model":"`+req.Model+`","choices":[],"served_by":"strict"}`)
	})
	return e
}

func (e *strictEngine) serve(models ...string) {
	e.mu.Lock()
	e.models = models
	e.mu.Unlock()
}

// design 003 on an upstream-metadata provider: the model sent is always
// the discovered id; a target naming another model is not routable (its
// pool's other targets serve); a pinned slug/X for another X is a 404
// naming the served id. Nothing is forwarded on a guess.
func TestUpstreamModelFailsClosed(t *testing.T) {
	h := newProbedHarness(t, Config{})
	eng := newStrictEngine(t, "real")
	other := newEcho(t, "other")
	u := h.upstreamProvider("u", eng.base())
	c := h.provider("c", other.base(), store.ProviderSettings{})
	h.route("wrong", "", store.Target{ProviderID: u, UpstreamModel: "stale-name", Weight: 100}, store.Target{ProviderID: c, UpstreamModel: "x", Weight: 1})
	h.route("wrong-only", "", store.Target{ProviderID: u, UpstreamModel: "stale-name", Weight: 1})
	h.route("any", "", store.Target{ProviderID: u, Weight: 1})
	h.route("named", "", store.Target{ProviderID: u, UpstreamModel: "real", Weight: 1})
	h.probe()

	for range 10 {
		if st, by, _, body := h.call("wrong"); st != 200 || by != "other" {
			t.Fatalf("a route with a mismatched target: %d %s %s", st, by, body)
		}
	}
	if eng.gen.Load() != 0 {
		t.Fatalf("a target naming another model was forwarded %d times", eng.gen.Load())
	}
	st, _, _, body := h.call("wrong-only")
	if st != 503 || !strings.Contains(body, "model_mismatch") || strings.Contains(body, "real") {
		t.Fatalf("only a mismatched target: %d %s", st, body)
	}
	for _, model := range []string{"any", "named", "u/real"} {
		if st, _, um, body := h.call(model); st != 200 || um != "real" {
			t.Fatalf("%s: %d upstream model %q %s", model, st, um, body)
		}
	}
	n := eng.gen.Load()
	st, _, _, body = h.call("u/stale-name")
	if st != 404 || !strings.Contains(body, `"code":"model_not_found"`) || !strings.Contains(body, `\"real\"`) || eng.gen.Load() != n {
		t.Fatalf("pinned to another model: %d %s (forwarded %d)", st, body, eng.gen.Load()-n)
	}
	// The model is swapped: "named" now names a model the box does not
	// serve; "any" follows the discovered id; u/real is a 404 naming the new one.
	eng.serve("new")
	h.probe()
	if st, _, _, body := h.call("named"); st != 503 || !strings.Contains(body, "model_mismatch") {
		t.Fatalf("after the swap, a target naming the old model: %d %s", st, body)
	}
	if st, _, um, body := h.call("any"); st != 200 || um != "new" {
		t.Fatalf("after the swap, the discovered id: %d %q %s", st, um, body)
	}
	if st, _, _, body := h.call("u/real"); st != 404 || !strings.Contains(body, `\"new\"`) {
		t.Fatalf("after the swap, pinned to the old id: %d %s", st, body)
	}
	if eng.gen.Load() != n+1 {
		t.Fatalf("%d generation requests after the swap, want only the one to the discovered id", eng.gen.Load()-n)
	}
}

// Issue 14 §4, stale targets: a configured target whose upstream answers
// that it does not serve the model fails over to the pool's other target,
// is marked not routable (shown in readiness), and comes back when a probe
// lists the model again. The caller never sees the upstream's answer or
// its model id.
func TestStaleTargetFailsOver(t *testing.T) {
	h := newProbedHarness(t, Config{})
	eng := newStrictEngine(t, "other-model")
	good := newEcho(t, "good")
	a := h.provider("a", eng.base(), store.ProviderSettings{})
	b := h.provider("b", good.base(), store.ProviderSettings{})
	h.route("pool", "", store.Target{ProviderID: a, UpstreamModel: "secret-model-id", Weight: 1000}, store.Target{ProviderID: b, UpstreamModel: "m", Weight: 1})
	h.route("alone", "", store.Target{ProviderID: a, UpstreamModel: "secret-model-id-2", Weight: 1})
	h.probe()

	st, by, _, body := h.call("pool")
	if st != 200 || by != "good" {
		t.Fatalf("first request: %d %s %s", st, by, body)
	}
	if eng.gen.Load() != 1 {
		t.Fatalf("the stale target was tried %d times, want 1", eng.gen.Load())
	}
	status, _ := h.probes.Status(a)
	if _, marked := status.Stale["secret-model-id"]; !marked {
		t.Fatalf("the target is not marked stale: %+v", status.Stale)
	}
	for range 20 {
		if st, by, _, _ := h.call("pool"); st != 200 || by != "good" {
			t.Fatalf("after the mark: %d %s", st, by)
		}
	}
	if eng.gen.Load() != 1 {
		t.Fatalf("a stale target was sent %d more requests", eng.gen.Load()-1)
	}
	// A single stale target: 503, the upstream's id never relayed.
	st, _, _, body = h.call("alone")
	if st != 503 || strings.Contains(body, "secret-model-id") || strings.Contains(body, "does not exist") {
		t.Fatalf("single stale target: %d %s", st, body)
	}
	st, _, _, body = h.call("alone")
	if st != 503 || !strings.Contains(body, "model_not_served") || strings.Contains(body, "secret-model-id") {
		t.Fatalf("single stale target, marked: %d %s", st, body)
	}
	// A probe that does not list the model keeps the mark; one that lists
	// it clears it.
	h.probe()
	if status, _ := h.probes.Status(a); len(status.Stale) != 2 {
		t.Fatalf("marks after a probe without the models: %+v", status.Stale)
	}
	eng.serve("secret-model-id")
	h.probe()
	if status, _ := h.probes.Status(a); len(status.Stale) != 1 {
		t.Fatalf("marks after the model is listed again: %+v", status.Stale)
	}
	n := eng.gen.Load()
	for range 20 {
		h.call("pool")
	}
	if eng.gen.Load() == n {
		t.Fatal("the target listed again never served")
	}
	// A caller's own typo on a provider without a catalog is the caller's
	// 404, relayed as before, and marks nothing.
	st, _, _, body = h.call("a/typo")
	if st != 404 || !strings.Contains(body, "does not exist") {
		t.Fatalf("caller typo: %d %s", st, body)
	}
	if status, _ := h.probes.Status(a); len(status.Stale) != 1 {
		t.Fatalf("a caller's typo marked a model: %+v", status.Stale)
	}
}
