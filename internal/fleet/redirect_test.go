package fleet

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// elsewhere is a server a redirect points to; it records what reached it.
type elsewhere struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits []string // method, path and Authorization of each request
}

func newElsewhere(t *testing.T) *elsewhere {
	e := &elsewhere{}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		e.hits = append(e.hits, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
		e.mu.Unlock()
		// Answer like a healthy vLLM, so a followed redirect would pass.
		w.Write([]byte(`{"data":[{"id":"Qwen/Qwen3-8B"}]}`))
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *elsewhere) requests() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.hits...)
}

// TestScenario27_FleetControllerDoesNotFollowRedirects: a box whose
// /health or /v1/models answers 302 to a server on another port (the case
// where Go's client forwards Authorization) fails its probe, and that
// server never receives a request, so never the host key. It holds for
// the controller's own client and for one passed in that would follow.
func TestScenario27_FleetControllerDoesNotFollowRedirects(t *testing.T) {
	const hostKey = "rh-k_redirect-host-key"
	for _, tc := range []struct {
		name     string
		redirect string // the path that answers 302
		client   *http.Client
	}{
		{"health, own client", "/health", nil},
		{"models, own client", "/v1/models", nil},
		{"health, caller's client", "/health", &http.Client{}},
		{"models, caller's client", "/v1/models", &http.Client{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			other := newElsewhere(t)
			box := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == tc.redirect {
					http.Redirect(w, r, other.srv.URL+r.URL.Path, http.StatusFound)
					return
				}
				w.Write([]byte(`{"data":[{"id":"Qwen/Qwen3-8B"}]}`))
			}))
			defer box.Close()
			u, _ := url.Parse(box.URL)
			port, _ := strconv.Atoi(u.Port())

			st := storetest.Open(t, "sqlite", nil)
			org := &store.Org{Name: "default"}
			must(t, st.CreateOrg(ctx, org))
			pj := &store.Project{OrgID: org.ID, Name: "default"}
			must(t, st.CreateProject(ctx, pj))
			h := &store.Host{OrgID: org.ID, ProjectID: pj.ID, IP: "127.0.0.1", Port: port, ModelName: "qwen3",
				APIKey: secret.New(hostKey), Recipe: fleetapi.Recipe{VLLM: vllm()}}
			must(t, st.CreateHost(ctx, h, nil))
			c := NewController(st, ControllerConfig{Client: tc.client, FailAfter: 1}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
			c.Sweep(ctx)

			if got := other.requests(); len(got) != 0 {
				t.Fatalf("the redirect was followed: %q (host key leaked: %v)", got, strings.Contains(strings.Join(got, " "), hostKey))
			}
			_, fail, lastErr, known := c.Health(h.ID)
			if !known || fail != 1 || !strings.Contains(lastErr, tc.redirect) || !strings.Contains(lastErr, "redirect") {
				t.Fatalf("probe not failed by the redirect: fail %d, %q", fail, lastErr)
			}
			if strings.Contains(lastErr, other.srv.URL) {
				t.Errorf("the probe error quotes the Location: %q", lastErr)
			}
			if x, _ := st.GetHost(ctx, org.ID, h.ID); x.State != store.HostPending {
				t.Fatalf("a redirecting box was registered: %s", x.State)
			}
		})
	}
	// The caller's client keeps its own policy.
	cl := &http.Client{}
	NewController(nil, ControllerConfig{Client: cl}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if cl.CheckRedirect != nil {
		t.Error("NewController changed the caller's client")
	}
}
