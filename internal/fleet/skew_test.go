package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

func TestServedSkew(t *testing.T) {
	cards := func(cs ...servedCard) []servedCard { return cs }
	for _, c := range []struct {
		name   string
		recipe *fleetapi.VLLM
		models []servedCard
		want   []Skew // Reason not compared
		found  bool
	}{
		{"agree", vllm("--max-model-len", "32768"), cards(servedCard{"Qwen/Qwen3-8B", 32768}), nil, true},
		{"no flag: the engine's choice is no skew", vllm(), cards(servedCard{"Qwen/Qwen3-8B", 40960}), nil, true},
		{"no card value: nothing to compare", vllm("--max-model-len", "32768"), cards(servedCard{"Qwen/Qwen3-8B", 0}), nil, true},
		{"max_model_len differs", vllm("--max_model_len=32768"), cards(servedCard{"other", 1}, servedCard{"Qwen/Qwen3-8B", 16384}),
			[]Skew{{Field: SkewMaxModelLen, Recipe: "32768", Served: "16384"}}, true},
		{"served name differs", vllm("--served-model-name", "qwen"), cards(servedCard{"Qwen/Qwen3-8B", 32768}),
			[]Skew{{Field: SkewServedName, Recipe: "qwen", Served: "Qwen/Qwen3-8B", Fatal: true}}, false},
		{"nothing served", vllm(), nil, []Skew{{Field: SkewServedName, Recipe: "Qwen/Qwen3-8B", Served: "(none)", Fatal: true}}, false},
		{"many served: the reason stays short", vllm(), cards(servedCard{ID: "a"}, servedCard{ID: "b"}, servedCard{ID: "c"}, servedCard{ID: "d"}, servedCard{ID: "e"}),
			[]Skew{{Field: SkewServedName, Recipe: "Qwen/Qwen3-8B", Served: "a, b, c, and 2 more", Fatal: true}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, got, found := servedSkew(c.recipe, c.models)
			for i := range got {
				if !strings.Contains(got[i].Reason, got[i].Served) || !strings.Contains(got[i].Reason, got[i].Recipe) {
					t.Errorf("reason %q does not name both values", got[i].Reason)
				}
				got[i].Reason = ""
			}
			if found != c.found || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v %v, want %+v %v", got, found, c.want, c.found)
			}
		})
	}
}

// skewBox is a fake vLLM whose served name and max_model_len a test sets.
type skewBox struct {
	srv     *httptest.Server
	name    atomic.Value // string
	maxLen  atomic.Int64
	healthy atomic.Bool
}

func newSkewBox(t *testing.T) *skewBox {
	b := &skewBox{}
	b.name.Store("Qwen/Qwen3-8B")
	b.maxLen.Store(32768)
	b.healthy.Store(true)
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			if !b.healthy.Load() {
				w.WriteHeader(503)
			}
		case "/v1/models":
			fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","max_model_len":%d}]}`, b.name.Load(), b.maxLen.Load())
		}
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *skewBox) port() int {
	u, _ := url.Parse(b.srv.URL)
	p, _ := strconv.Atoi(u.Port())
	return p
}

// TestControllerReportsServedSkew: a box that serves another
// max_model_len than its recipe's flag is routed with the served context
// and reported skewed (host view, metric); one that serves another name is
// kept out of routing, fatally skewed; both clear when the box agrees.
func TestControllerReportsServedSkew(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		st := storetest.Open(t, d, nil)
		org := &store.Org{Name: "acme"}
		must(t, st.CreateOrg(ctx, org))
		pj := &store.Project{OrgID: org.ID, Name: "default"}
		must(t, st.CreateProject(ctx, pj))
		b := newSkewBox(t)
		b.maxLen.Store(16384)
		h := &store.Host{OrgID: org.ID, ProjectID: pj.ID, IP: "127.0.0.1", Port: b.port(), ModelName: "qwen3",
			APIKey: secret.New("rh-k_secret"), Recipe: fleetapi.Recipe{VLLM: vllm("--max-model-len", "32768")}}
		must(t, st.CreateHost(ctx, h, nil))
		reg := prometheus.NewRegistry()
		clk := clock.NewManual(time.Now())
		c := NewController(st, ControllerConfig{FailAfter: 1, Registry: reg, Now: clk.Now,
			OrgName: func(id int64) string {
				if id == org.ID {
					return "acme"
				}
				return ""
			}}, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		argSkew := func() float64 {
			return gauge(t, reg, "rolter_fleet_host_skew", map[string]string{"org": "acme", "host": strconv.FormatInt(h.ID, 10), "kind": "args"})
		}
		get := func() *store.Host {
			x, err := st.GetHost(ctx, org.ID, h.ID)
			must(t, err)
			return x
		}

		c.Sweep(ctx)
		sk := c.Skew(h.ID)
		if len(sk) != 1 || sk[0].Field != SkewMaxModelLen || sk[0].Recipe != "32768" || sk[0].Served != "16384" || sk[0].Fatal {
			t.Fatalf("skew %+v, want max_model_len 32768 vs 16384, not fatal", sk)
		}
		if x := get(); x.State != store.HostServing {
			t.Fatalf("a max_model_len skew kept the host out of routing: %s", x.State)
		}
		if p, err := st.GetProvider(ctx, org.ID, get().ProviderSlug); err != nil || p.ContextLimit != 16384 {
			t.Fatalf("registered context %v %v, want the served 16384", p, err)
		}
		if v := argSkew(); v != 1 {
			t.Fatalf("args skew gauge %v, want 1", v)
		}

		b.maxLen.Store(32768) // the box agrees again: seen at the next read of the card
		clk.Advance(time.Minute)
		c.Sweep(ctx)
		if sk := c.Skew(h.ID); sk != nil || argSkew() != 0 {
			t.Fatalf("skew after the box agreed: %+v, gauge %v", sk, argSkew())
		}

		b.name.Store("mistral") // another model answers on the host's port
		clk.Advance(time.Minute)
		c.Sweep(ctx)
		sk = c.Skew(h.ID)
		if len(sk) != 1 || sk[0].Field != SkewServedName || !sk[0].Fatal || sk[0].Served != "mistral" {
			t.Fatalf("skew %+v, want a fatal served_model_name", sk)
		}
		if x := get(); x.State != store.HostDown {
			t.Fatalf("a host serving another model stayed %s", x.State)
		}
		if argSkew() != 1 {
			t.Fatal("the served-name skew is not in the metric")
		}

		b.healthy.Store(false) // a probe that cannot read the card keeps what was seen
		c.Sweep(ctx)
		if sk := c.Skew(h.ID); len(sk) != 1 || sk[0].Field != SkewServedName {
			t.Fatalf("skew after a failed /health: %+v", sk)
		}
		b.healthy.Store(true)
		b.name.Store("Qwen/Qwen3-8B")
		c.Sweep(ctx)
		if sk := c.Skew(h.ID); sk != nil || get().State != store.HostServing {
			t.Fatalf("after the box serves its recipe: skew %+v, state %s", sk, get().State)
		}
	})
}
