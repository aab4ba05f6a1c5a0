package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
)

func testRecipe(model string, args ...string) fleetapi.Recipe {
	return fleetapi.Recipe{VLLM: &fleetapi.VLLM{Model: model, Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 8, DiskGB: 18, Args: args}}
}

// routeTargets returns "slug:upstream" of the route's targets, or nil when
// the route does not exist.
func routeTargets(t *testing.T, s store.Store, project int64, model string) []string {
	t.Helper()
	r, err := s.GetRoute(context.Background(), project, model)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, tg := range r.Targets {
		out = append(out, tg.ProviderSlug+":"+tg.UpstreamModel)
	}
	return out
}

func TestHostLifecycle(t *testing.T) {
	sealer, err := secret.NewSealer(secret.New("6d501d6e7768cd94429a01bf52d49df202f337234c55805741aa9bf3cb2867e0"))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, sealer)
		o := mustOrg(t, s, "acme")
		pj := mustProject(t, s, o.ID, "fleet")
		h := &store.Host{OrgID: o.ID, ProjectID: pj.ID, IP: "10.0.0.5", Port: 8000, ModelName: "qwen3",
			APIKey: secret.New("rh-abc_secret"), Recipe: testRecipe("Qwen/Qwen3-8B", "--max-model-len", "32768"), Notes: "rented"}
		if err := s.CreateHost(ctx, h, nil); err != nil {
			t.Fatal(err)
		}
		if h.ID == 0 || h.State != store.HostPending {
			t.Fatalf("create: %+v", h)
		}
		// The key is sealed at rest.
		var raw string
		if err := s.SQL().QueryRow(`SELECT api_key FROM hosts`).Scan(&raw); err != nil || strings.Contains(raw, "rh-abc_secret") {
			t.Fatalf("api key stored as %q (%v)", raw, err)
		}
		// One live host per address.
		dup := *h
		dup.ID = 0
		var ce *store.ConflictError
		if err := s.CreateHost(ctx, &dup, nil); !errors.As(err, &ce) || ce.What != "host address" {
			t.Fatalf("duplicate address: %v", err)
		}
		got, err := s.GetHost(ctx, o.ID, h.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.APIKey.Reveal() != "rh-abc_secret" || got.Recipe.VLLM.Model != "Qwen/Qwen3-8B" || got.Notes != "rented" || got.ProviderID != 0 {
			t.Fatalf("get: %+v", got)
		}
		if routeTargets(t, s, pj.ID, "qwen3") != nil {
			t.Fatal("a pending host has a route")
		}

		// Register twice: one provider, one target.
		reg := store.HostRegistration{ServedModel: "Qwen/Qwen3-8B", ContextLimit: 32768}
		for i := 0; i < 2; i++ {
			if err := s.RegisterHost(ctx, h.ID, reg); err != nil {
				t.Fatal(err)
			}
		}
		if got := routeTargets(t, s, pj.ID, "qwen3"); len(got) != 1 || got[0] != fmt.Sprintf("host-%d:Qwen/Qwen3-8B", h.ID) {
			t.Fatalf("targets after register: %v", got)
		}
		got, _ = s.GetHost(ctx, o.ID, h.ID)
		if got.State != store.HostServing || got.ProviderID == 0 || got.ProviderSlug != fmt.Sprintf("host-%d", h.ID) {
			t.Fatalf("after register: %+v", got)
		}
		st, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var prov *store.Provider
		for i := range st.Providers {
			if st.Providers[i].ID == got.ProviderID {
				prov = &st.Providers[i]
			}
		}
		if prov == nil || prov.Kind != "vllm" || prov.BaseURL != "http://10.0.0.5:8000/v1" || prov.ContextLimit != 32768 ||
			len(prov.Keys) != 1 || prov.Keys[0].Secret.Reveal() != "rh-abc_secret" || prov.DeletedAt != nil {
			t.Fatalf("registered provider: %+v", prov)
		}

		// Down: the target goes, the provider leaves routing, the route stays.
		if err := s.DeregisterHost(ctx, h.ID, store.HostDown); err != nil {
			t.Fatal(err)
		}
		if got := routeTargets(t, s, pj.ID, "qwen3"); len(got) != 0 {
			t.Fatalf("targets after down: %v", got)
		}
		p, err := s.GetProvider(ctx, o.ID, prov.Slug)
		if err != nil || p.DeletedAt == nil {
			t.Fatalf("provider after down: %+v %v", p, err)
		}
		// Up again: the same provider comes back.
		if err := s.RegisterHost(ctx, h.ID, reg); err != nil {
			t.Fatal(err)
		}
		again, _ := s.GetHost(ctx, o.ID, h.ID)
		if again.ProviderID != got.ProviderID || again.State != store.HostServing {
			t.Fatalf("re-register: %+v", again)
		}
		if got := routeTargets(t, s, pj.ID, "qwen3"); len(got) != 1 {
			t.Fatalf("targets after re-register: %v", got)
		}

		// Fetch, report, apply.
		at := time.Now().UTC().Truncate(time.Second)
		if err := s.TouchHosts(ctx, []int64{h.ID}, at); err != nil {
			t.Fatal(err)
		}
		if err := s.RequestApply(ctx, o.ID, h.ID); err != nil {
			t.Fatal(err)
		}
		rep := store.HostReport{Discovered: fleetapi.Discovered{GPU: "1x NVIDIA L4", GPUCount: 1, VRAMGB: 22.5}}
		if err := s.RecordHostReports(ctx, []store.HostReportEntry{{HostID: h.ID, Applied: "abcd", Report: rep,
			Current: &store.AppliedAssignment{Revision: "abcd", Port: 8000, Recipe: h.Recipe}}}, at); err != nil {
			t.Fatal(err)
		}
		again, _ = s.GetHost(ctx, o.ID, h.ID)
		if again.LastConfigFetch == nil || !again.LastConfigFetch.Equal(at) || again.AppliedRevision != "abcd" ||
			again.ApplyRequested || again.Report.Discovered.GPU != "1x NVIDIA L4" ||
			again.Applied == nil || again.Applied.Revision != "abcd" || again.Applied.Port != 8000 || again.Applied.Recipe.VLLM.Model != "Qwen/Qwen3-8B" {
			t.Fatalf("after report: %+v", again)
		}
		if hs, err := s.ListHostsByIP(ctx, o.ID, "10.0.0.5"); err != nil || len(hs) != 1 {
			t.Fatalf("by ip: %v %v", hs, err)
		}

		// Retire keeps the record and frees the address.
		if err := s.DeregisterHost(ctx, h.ID, store.HostRetired); err != nil {
			t.Fatal(err)
		}
		again, _ = s.GetHost(ctx, o.ID, h.ID)
		if again.State != store.HostRetired || again.RetiredAt == nil {
			t.Fatalf("retired: %+v", again)
		}
		if err := s.RegisterHost(ctx, h.ID, reg); err == nil {
			t.Fatal("a retired host was registered")
		}
		if err := s.DeregisterHost(ctx, h.ID, store.HostDown); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a retired host went down: %v", err)
		}
		if hs, _ := s.ListLiveHosts(ctx); len(hs) != 0 {
			t.Fatalf("live hosts after retire: %v", hs)
		}
		if hs, _ := s.ListHosts(ctx, o.ID, store.Page{}); len(hs) != 1 {
			t.Fatalf("all hosts after retire: %v", hs)
		}
		if err := s.CreateHost(ctx, &dup, nil); err != nil {
			t.Fatalf("a retired host's address is free again: %v", err)
		}
	})
}

func TestFleetKeys(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		var keys []*store.FleetKey
		for i := 0; i < 3; i++ {
			tok, lookup := secret.Mint(secret.PrefixFleetKey)
			k := &store.FleetKey{OrgID: o.ID, Name: "k", Lookup: lookup, Hash: secret.HashOf(tok.Reveal())}
			err := s.CreateFleetKey(ctx, k, 2)
			if i < 2 && err != nil {
				t.Fatal(err)
			}
			var ce *store.ConflictError
			if i == 2 && (!errors.As(err, &ce) || ce.What != "active fleet keys") {
				t.Fatalf("third active key: %v", err)
			}
			keys = append(keys, k)
		}
		got, err := s.FleetKeyByLookup(ctx, keys[0].Lookup)
		if err != nil || !got.Hash.Equal(keys[0].Hash) || got.OrgID != o.ID {
			t.Fatalf("by lookup: %+v %v", got, err)
		}
		if err := s.RevokeFleetKey(ctx, o.ID, keys[0].ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.FleetKeyByLookup(ctx, keys[0].Lookup); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("revoked key still found: %v", err)
		}
		if err := s.CreateFleetKey(ctx, keys[2], 2); err != nil {
			t.Fatalf("after a revoke a new key fits: %v", err)
		}
		if ks, _ := s.ListFleetKeys(ctx, o.ID, store.Page{}); len(ks) != 3 || ks[0].RevokedAt == nil {
			t.Fatalf("list: %+v", ks)
		}
	})
}

// TestLease: on PostgreSQL one replica at a time holds a lease; on SQLite
// the single process always does.
func TestLease(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		spec, dir := storetest.Spec(t, d)
		a, err := sqlstore.Open(ctx, spec, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := sqlstore.Open(ctx, spec, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		la, lb := a.NewLease("fleet"), b.NewLease("fleet")
		defer la.Release()
		defer lb.Release()
		if !la.Held(ctx) || !la.Held(ctx) {
			t.Fatal("first replica cannot take the lease")
		}
		if d == "sqlite" {
			if !lb.Held(ctx) {
				t.Fatal("sqlite lease not held")
			}
			return
		}
		if lb.Held(ctx) {
			t.Fatal("two replicas hold one lease")
		}
		if !b.NewLease("other").Held(ctx) {
			t.Fatal("a lease of another name is blocked")
		}
		la.Release()
		if !lb.Held(ctx) {
			t.Fatal("the lease did not pass on after release")
		}
		if la.Held(ctx) {
			t.Fatal("the lease went back while held")
		}
	})
}

// TestRetireRacesRegistration: a retire concurrent with a registration
// always ends retired with no target, whichever commits first.
func TestRetireRacesRegistration(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		pj := mustProject(t, s, o.ID, "fleet")
		for i := 0; i < 20; i++ {
			h := &store.Host{OrgID: o.ID, ProjectID: pj.ID, IP: "10.0.0.5", Port: 8000 + i, ModelName: "qwen3",
				APIKey: secret.New("rh-a_b"), Recipe: testRecipe("m")}
			if err := s.CreateHost(ctx, h, nil); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- s.RegisterHost(ctx, h.ID, store.HostRegistration{ServedModel: "m"}) }()
			if err := s.DeregisterHost(ctx, h.ID, store.HostRetired); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil { // fine: the host was already retired
				t.Logf("register after retirement: %v", err)
			}
			got, err := s.GetHost(ctx, o.ID, h.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != store.HostRetired {
				t.Fatalf("round %d: state %s after retire", i, got.State)
			}
			for _, tg := range routeTargets(t, s, pj.ID, "qwen3") {
				if strings.HasPrefix(tg, fmt.Sprintf("host-%d:", h.ID)) {
					t.Fatalf("round %d: a retired host is routed: %v", i, tg)
				}
			}
		}
	})
}

// TestPoolCheckIsSerialised: concurrent creates into one pool, half with a
// conflicting recipe, never leave two disagreeing live hosts.
func TestPoolCheckIsSerialised(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		pj := mustProject(t, s, o.ID, "fleet")
		errDiffer := errors.New("differs")
		var wg sync.WaitGroup
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				h := &store.Host{OrgID: o.ID, ProjectID: pj.ID, IP: fmt.Sprintf("10.0.0.%d", i+1), Port: 8000, ModelName: "qwen3",
					APIKey: secret.New("rh-a_b"), Recipe: testRecipe("m", "--max-model-len", fmt.Sprint(1024*(1+i%2)))}
				_ = s.CreateHost(ctx, h, func(pool []store.Host) error {
					for _, p := range pool {
						if p.Recipe.VLLM.Args[1] != h.Recipe.VLLM.Args[1] {
							return errDiffer
						}
					}
					return nil
				})
			}(i)
		}
		wg.Wait()
		hs, err := s.ListLiveHosts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(hs) == 0 {
			t.Fatal("no host was created")
		}
		for _, h := range hs {
			if h.Recipe.VLLM.Args[1] != hs[0].Recipe.VLLM.Args[1] {
				t.Fatalf("the pool disagrees: %v vs %v", h.Recipe.VLLM.Args, hs[0].Recipe.VLLM.Args)
			}
		}
	})
}

// TestRecordHostReports: a report's entries are written together; one for
// a host that is gone is skipped; when one entry fails none is written.
func TestRecordHostReports(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		pj := mustProject(t, s, o.ID, "fleet")
		var hs []*store.Host
		for i := range 2 {
			h := &store.Host{OrgID: o.ID, ProjectID: pj.ID, IP: "10.0.0.5", Port: 8000 + i, ModelName: "qwen3",
				APIKey: secret.New(fmt.Sprintf("rh-abc_%d", i)), Recipe: testRecipe("Qwen/Qwen3-8B")}
			if err := s.CreateHost(ctx, h, nil); err != nil {
				t.Fatal(err)
			}
			if err := s.RequestApply(ctx, o.ID, h.ID); err != nil {
				t.Fatal(err)
			}
			hs = append(hs, h)
		}
		get := func(id int64) *store.Host {
			h, err := s.GetHost(ctx, o.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
		if d == "postgres" {
			// PostgreSQL refuses a NUL in text: the second entry fails,
			// so the first is not written either.
			err := s.RecordHostReports(ctx, []store.HostReportEntry{
				{HostID: hs[0].ID, Applied: "r1"}, {HostID: hs[1].ID, Applied: "bad\x00"}}, time.Now())
			if err == nil {
				t.Fatal("a NUL in text was stored")
			}
			if h := get(hs[0].ID); h.ReportedAt != nil || h.AppliedRevision != "" {
				t.Fatalf("a failed report wrote its first entry: %+v", h)
			}
		}
		at := time.Now().UTC().Truncate(time.Second)
		err := s.RecordHostReports(ctx, []store.HostReportEntry{
			{HostID: hs[0].ID, Applied: "r1", Current: &store.AppliedAssignment{Revision: "r1", Port: 8000, Recipe: hs[0].Recipe}},
			{HostID: 999999, Applied: "gone"},
			{HostID: hs[1].ID, Report: store.HostReport{Error: "does not fit"}},
		}, at)
		if err != nil {
			t.Fatal(err)
		}
		h0, h1 := get(hs[0].ID), get(hs[1].ID)
		if h0.AppliedRevision != "r1" || h0.Applied == nil || h0.ApplyRequested || h0.ReportedAt == nil || !h0.ReportedAt.Equal(at) {
			t.Errorf("current entry: %+v", h0)
		}
		if h1.Report.Error != "does not fit" || h1.Applied != nil || !h1.ApplyRequested || h1.ReportedAt == nil {
			t.Errorf("entry without a current revision: %+v", h1)
		}
		if err := s.RecordHostReports(ctx, nil, at); err != nil {
			t.Errorf("an empty report: %v", err)
		}
	})
}

// An hf source's token is sealed at rest, opens on read, and UpdateHost
// rotates and clears it; a host without one stores ”.
func TestHostHFTokenSealed(t *testing.T) {
	sealer, err := secret.NewSealer(secret.New("6d501d6e7768cd94429a01bf52d49df202f337234c55805741aa9bf3cb2867e0"))
	if err != nil {
		t.Fatal(err)
	}
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, sealer)
		o := mustOrg(t, s, "acme")
		pj := mustProject(t, s, o.ID, "fleet")
		h := &store.Host{OrgID: o.ID, ProjectID: pj.ID, IP: "10.0.0.5", Port: 8000, ModelName: "qwen3",
			APIKey: secret.New("rh-abc_secret"), Recipe: testRecipe("Qwen/Qwen3-8B"), HFToken: secret.New("hf_plainTokenValue1")}
		if err := s.CreateHost(ctx, h, nil); err != nil {
			t.Fatal(err)
		}
		raw := func() string {
			t.Helper()
			var v string
			if err := s.SQL().QueryRow(`SELECT hf_token FROM hosts WHERE id = ` + strconv.FormatInt(h.ID, 10)).Scan(&v); err != nil {
				t.Fatal(err)
			}
			return v
		}
		if r := raw(); r == "" || strings.Contains(r, "hf_plainTokenValue1") {
			t.Fatalf("hf token stored as %q", r)
		}
		got, err := s.GetHost(ctx, o.ID, h.ID)
		if err != nil || got.HFToken.Reveal() != "hf_plainTokenValue1" {
			t.Fatalf("get: %v %v", got, err)
		}
		got.HFToken = secret.New("hf_rotatedValue2")
		if err := s.UpdateHost(ctx, got, nil); err != nil {
			t.Fatal(err)
		}
		if r := raw(); strings.Contains(r, "hf_rotatedValue2") {
			t.Fatalf("rotated hf token stored as %q", r)
		}
		if got, err = s.GetHost(ctx, o.ID, h.ID); err != nil || got.HFToken.Reveal() != "hf_rotatedValue2" {
			t.Fatalf("after rotation: %v %v", got, err)
		}
		got.HFToken = secret.Secret{}
		if err := s.UpdateHost(ctx, got, nil); err != nil {
			t.Fatal(err)
		}
		if r := raw(); r != "" {
			t.Fatalf("cleared hf token stored as %q", r)
		}
		if got, err = s.GetHost(ctx, o.ID, h.ID); err != nil || !got.HFToken.IsZero() {
			t.Fatalf("after clearing: %v %v", got, err)
		}
	})
}

// RecordConfigFetches writes many hosts' liveness at once, each its own
// time, skips hosts that are gone, and keeps a later time already
// written (another replica's, or an overlapping flush's), on both stores.
func TestRecordConfigFetches(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		s := storetest.Open(t, d, nil)
		o := mustOrg(t, s, "acme")
		pj := mustProject(t, s, o.ID, "fleet")
		var fetches []store.ConfigFetch
		base := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
		const n = 1203 // over one PostgreSQL chunk
		ids := make([]int64, 0, n)
		for i := range n {
			h := &store.Host{OrgID: o.ID, ProjectID: pj.ID, IP: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), Port: 8000, ModelName: "qwen3",
				APIKey: secret.New(fmt.Sprintf("rh-abc_%d", i)), Recipe: testRecipe("Qwen/Qwen3-8B")}
			if err := s.CreateHost(ctx, h, nil); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, h.ID)
			fetches = append(fetches, store.ConfigFetch{HostID: h.ID, At: base.Add(time.Duration(i) * time.Millisecond)})
		}
		fetches = append(fetches, store.ConfigFetch{HostID: 999999999, At: base})
		if err := s.RecordConfigFetches(ctx, fetches); err != nil {
			t.Fatal(err)
		}
		for _, i := range []int{0, 1, 999, 1000, n - 1} {
			h, err := s.GetHost(ctx, o.ID, ids[i])
			if err != nil {
				t.Fatal(err)
			}
			if want := fetches[i].At; h.LastConfigFetch == nil || !h.LastConfigFetch.Equal(want) {
				t.Fatalf("host %d: last_config_fetch %v, want %v", i, h.LastConfigFetch, want)
			}
		}
		if err := s.RecordConfigFetches(ctx, nil); err != nil {
			t.Fatalf("no fetches: %v", err)
		}
		// Another replica's later fetch stays.
		later := base.Add(time.Hour)
		if err := s.RecordConfigFetches(ctx, []store.ConfigFetch{{HostID: ids[0], At: later}}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordConfigFetches(ctx, []store.ConfigFetch{{HostID: ids[0], At: base.Add(time.Minute)}, {HostID: ids[1], At: later}}); err != nil {
			t.Fatal(err)
		}
		h0, _ := s.GetHost(ctx, o.ID, ids[0])
		h1, _ := s.GetHost(ctx, o.ID, ids[1])
		if !h1.LastConfigFetch.Equal(later) {
			t.Fatalf("host 1: %v, want %v", h1.LastConfigFetch, later)
		}
		if !h0.LastConfigFetch.Equal(later) {
			t.Fatalf("an earlier fetch moved host 0 back: %v, want %v", h0.LastConfigFetch, later)
		}
		// Sub-second times compare as times, not as text (SQLite keeps
		// them as text without trailing zeros).
		steps := []struct {
			at, want time.Time
		}{
			{later.Add(500 * time.Millisecond), later.Add(500 * time.Millisecond)},
			{later.Add(time.Second - time.Microsecond), later.Add(time.Second - time.Microsecond)},
			{later.Add(10 * time.Millisecond), later.Add(time.Second - time.Microsecond)},
			{later.Add(time.Second), later.Add(time.Second)},
			{later.Add(999 * time.Millisecond), later.Add(time.Second)},
			{later.Add(time.Second + time.Microsecond), later.Add(time.Second + time.Microsecond)},
		}
		for i, st := range steps {
			if err := s.RecordConfigFetches(ctx, []store.ConfigFetch{{HostID: ids[2], At: st.at}}); err != nil {
				t.Fatal(err)
			}
			if h, _ := s.GetHost(ctx, o.ID, ids[2]); h.LastConfigFetch == nil || !h.LastConfigFetch.Equal(st.want) {
				t.Fatalf("step %d: wrote %v: stored %v, want %v", i, st.at, h.LastConfigFetch, st.want)
			}
		}
	})
}
