package readiness

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// TestSharedEndpointIsProbedOnce (issue 21): providers with the same
// endpoint and credential share their probes. ProbeAll sends one probe
// per endpoint and credential and applies it to each provider; a second
// ProbeAll probes again, whatever the clock says.
func TestSharedEndpointIsProbedOnce(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, "")
	c, _ := newTestCache(t, Config{FailAfter: 1})
	base := eng.url() + "/v1"
	var ps []Provider
	for i := range 50 {
		ps = append(ps, Provider{ID: int64(i + 1), Kind: store.KindVLLM, BaseURL: base, Credential: secretKey})
	}
	// The same endpoint with another key is probed on its own.
	ps = append(ps, Provider{ID: 100, Kind: store.KindVLLM, BaseURL: base, Credential: secret.New("sk-other")})
	c.Sync(ps)

	c.ProbeAll(context.Background())
	if got := eng.hits("GET /health"); got != 2 {
		t.Fatalf("ProbeAll of 50 providers on one endpoint and key, and one on another key: %d probes, want 2", got)
	}
	for _, p := range ps {
		if st := mustStatus(t, c, p.ID); !st.Ready || !st.LastProbe.Equal(testEpoch) {
			t.Fatalf("provider %d: %+v", p.ID, st)
		}
	}
	eng.set("/health", 503, "")
	c.ProbeAll(context.Background())
	if got := eng.hits("GET /health"); got != 4 {
		t.Fatalf("a second ProbeAll: %d probes in all, want 4", got)
	}
	for _, p := range ps {
		if st := mustStatus(t, c, p.ID); st.Ready || st.Class != ClassHealthFailed {
			t.Fatalf("provider %d after the endpoint failed: %+v", p.ID, st)
		}
	}
}

// TestSharedProbeFreshness: a provider whose probe comes due applies its
// endpoint's shared observation while it is under Interval/2 old, and
// probes itself after that; a probe ProbeSoon asked for is always sent.
// An endpoint no other provider shares is never in the shared table.
func TestSharedProbeFreshness(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, "")
	alone := newEngine(t)
	alone.set("/health", 200, "")
	clk := clock.NewManual(testEpoch)
	c, _ := newClockedCache(t, Config{Interval: 10 * time.Second}, clk)
	base := eng.url() + "/v1"
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: base}, {ID: 2, Kind: store.KindVLLM, BaseURL: base},
		{ID: 3, Kind: store.KindVLLM, BaseURL: alone.url() + "/v1"}})
	es := *c.entries.Load()
	ctx := context.Background()
	probes := func(want int, what string) {
		t.Helper()
		if got := eng.hits("GET /health"); got != want {
			t.Fatalf("%s: %d probes of the shared endpoint, want %d", what, got, want)
		}
	}

	c.probe(ctx, es[1], false)
	probes(1, "first probe")
	clk.Advance(4 * time.Second)
	c.probe(ctx, es[2], false)
	probes(1, "the other provider, 4s later")
	if st := mustStatus(t, c, 2); !st.Ready || !st.LastProbe.Equal(testEpoch) {
		t.Fatalf("provider 2 applied the shared probe: %+v, want LastProbe at the probe's time", st)
	}
	clk.Advance(2 * time.Second)
	c.probe(ctx, es[2], false)
	probes(2, "6s later, over Interval/2")
	c.probe(ctx, es[1], true)
	probes(3, "a triggered probe")

	c.probe(ctx, es[3], false)
	c.probe(ctx, es[3], false)
	if got := alone.hits("GET /health"); got != 2 {
		t.Fatalf("a provider alone at its endpoint: %d probes, want 2", got)
	}
	c.shareMu.Lock()
	n := len(c.shared)
	c.shareMu.Unlock()
	if n != 1 {
		t.Fatalf("shared table holds %d endpoints, want 1", n)
	}
	// Alone now: the endpoint leaves the table and probes are its own.
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: base}})
	c.shareMu.Lock()
	n = len(c.shared)
	c.shareMu.Unlock()
	if n != 0 {
		t.Fatalf("after Sync left one provider there, the shared table holds %d endpoints", n)
	}
	c.probe(ctx, (*c.entries.Load())[1], false)
	probes(4, "a provider alone after Sync")
}

// TestUnchangedProbeKeepsItsStatus (issue 21): a probe that changes
// nothing but LastProbe publishes no new Status (ten thousand providers
// probed every Interval would each allocate one), yet Status reports the
// new LastProbe; providers never probed share their initial status.
func TestUnchangedProbeKeepsItsStatus(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, "")
	clk := clock.NewManual(testEpoch)
	c, _ := newClockedCache(t, Config{}, clk)
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: eng.url() + "/v1"}, {ID: 2, Kind: store.KindVLLM, BaseURL: eng.url() + "/v1/"}})
	e1, e2 := (*c.entries.Load())[1], (*c.entries.Load())[2]
	if e1.status.Load() != e2.status.Load() {
		t.Fatal("two providers never probed have statuses of their own")
	}
	ctx := context.Background()
	c.probe(ctx, e1, false)
	first := e1.status.Load()
	clk.Advance(time.Minute)
	c.probe(ctx, e1, false)
	if e1.status.Load() != first {
		t.Fatal("a probe that changed nothing published a new status")
	}
	if st := mustStatus(t, c, 1); !st.Ready || !st.LastProbe.Equal(testEpoch.Add(time.Minute)) {
		t.Fatalf("status %+v, want ready, probed a minute after the epoch", st)
	}
	eng.set("/health", 503, "")
	clk.Advance(time.Minute) // past the probe the two share (share.go)
	c.probe(ctx, e1, false)
	if st := mustStatus(t, c, 1); e1.status.Load() == first || st.LastError == "" {
		t.Fatalf("a failed probe: %+v, the same published status", st)
	}
}

// TestSyncKeepsEntriesOfAnUnchangedList (issue 21): a Sync whose providers
// keep their entries (a route or policy written, a provider renamed, a
// key replaced) keeps the entries' map, and applies what changed: the new
// names, and the sharing a new credential makes or ends. One that adds,
// drops or resets an entry, or names an id twice, makes a new map.
func TestSyncKeepsEntriesOfAnUnchangedList(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, "")
	c, logs := newTestCache(t, Config{})
	base := eng.url() + "/v1"
	ps := []Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: base, Credential: secretKey, Slug: "one"},
		{ID: 2, Kind: store.KindVLLM, BaseURL: base + "/", Credential: secret.New("sk-two"), Slug: "two"}}
	c.Sync(ps)
	m := c.entries.Load()
	e1, e2 := (*m)[1], (*m)[2]
	c.ProbeAll(context.Background())
	shared := func() (bool, bool, int) {
		c.shareMu.Lock()
		defer c.shareMu.Unlock()
		return e1.shared.Load(), e2.shared.Load(), len(c.shared)
	}
	if a, b, n := shared(); a || b || n != 0 {
		t.Fatalf("two keys at one endpoint: shared %v %v, table %d", a, b, n)
	}

	c.Sync(ps)
	if c.entries.Load() != m || mustStatus(t, c, 2).LastProbe.IsZero() {
		t.Fatal("the same list again made new entries")
	}
	ps[1].Credential, ps[1].Slug = secretKey, "two-renamed"
	c.Sync(ps)
	if c.entries.Load() != m {
		t.Fatal("a renamed provider and a new key made new entries")
	}
	if p := e2.provider.Load(); p.Slug != "two-renamed" || p.Credential != secretKey || p.BaseURL != base {
		t.Fatalf("entry 2 has %+v", *p)
	}
	c.ProbeAll(context.Background())
	if a, b, n := shared(); !a || !b || n != 1 {
		t.Fatalf("one key at one endpoint: shared %v %v, table %d; want both shared, one endpoint", a, b, n)
	}
	ps[1].Credential = secret.New("sk-two")
	c.Sync(ps)
	if a, b, n := shared(); a || b || n != 0 {
		t.Fatalf("the key changed back: shared %v %v, table %d", a, b, n)
	}

	c.Sync([]Provider{ps[0], ps[0]}) // as many providers, one id twice
	if _, ok := c.Status(2); ok || c.entries.Load() == m || (*c.entries.Load())[1] != e1 {
		t.Fatal("a list naming provider 1 twice kept provider 2, or lost provider 1's entry")
	}
	if !strings.Contains(logs.String(), "duplicate provider id") {
		t.Fatalf("no warning of the duplicate id: %s", logs.String())
	}
	ps[0].BaseURL = eng.url() + "/other/v1"
	c.Sync(ps[:1])
	if (*c.entries.Load())[1] == e1 || !mustStatus(t, c, 1).LastProbe.IsZero() {
		t.Fatal("a new base URL kept the provider's state")
	}
}
