package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// A host registers with the context its box serves (the /v1/models card's
// max_model_len), not the recipe's flag: a recipe without --max-model-len
// still gets context admission, and a changed served context re-registers.
// A card without the key falls back to the recipe's flag. A serving
// host's card is read again once CardEvery has passed.
func TestRegistrationUsesServedContext(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		st := storetest.Open(t, d, nil)
		org := &store.Org{Name: "default"}
		must(t, st.CreateOrg(ctx, org))
		pj := &store.Project{OrgID: org.ID, Name: "default"}
		must(t, st.CreateProject(ctx, pj))
		var card atomic.Value // the max_model_len member, raw JSON; "" for none
		card.Store("40960")
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/models" {
				extra := ""
				if v := card.Load().(string); v != "" {
					extra = `,"max_model_len":` + v
				}
				fmt.Fprintf(w, `{"data":[{"id":"Qwen/Qwen3-8B"%s}]}`, extra)
			}
		}))
		t.Cleanup(srv.Close)
		u, _ := url.Parse(srv.URL)
		port, _ := strconv.Atoi(u.Port())
		h := &store.Host{OrgID: org.ID, ProjectID: pj.ID, IP: "127.0.0.1", Port: port, ModelName: "qwen3",
			APIKey: secret.New("rh-k_secret"), Recipe: fleetapi.Recipe{VLLM: vllm()}} // no --max-model-len
		must(t, st.CreateHost(ctx, h, nil))
		clk := clock.NewManual(time.Now())
		c := NewController(st, ControllerConfig{Now: clk.Now}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		contextOf := func() int {
			x, err := st.GetHost(ctx, org.ID, h.ID)
			must(t, err)
			p, err := st.GetProvider(ctx, org.ID, x.ProviderSlug)
			must(t, err)
			return p.ContextLimit
		}
		c.Sweep(ctx)
		if got := contextOf(); got != 40960 {
			t.Fatalf("registered context %d, want the card's 40960", got)
		}
		card.Store("8192") // the engine restarted with a smaller context
		c.Sweep(ctx)
		if got := contextOf(); got != 40960 {
			t.Fatalf("a /health-only probe changed the context to %d", got)
		}
		clk.Advance(time.Minute)
		c.Sweep(ctx)
		if got := contextOf(); got != 8192 {
			t.Fatalf("after the card changed: %d, want 8192", got)
		}
		card.Store(`"lots"`) // not a number: the recipe's flag (none) applies
		clk.Advance(time.Minute)
		c.Sweep(ctx)
		if got := contextOf(); got != 0 {
			t.Fatalf("unbelievable card: %d, want 0", got)
		}
	})
}
