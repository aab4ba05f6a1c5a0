package sqlstore_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/money"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

func amount(v money.Amount) *money.Amount { return &v }

// TestSpendColumns round-trips prices, budgets and costs on both stores.
func TestSpendColumns(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		s := storetest.Open(t, dialect, nil)
		o := mustOrg(t, s, "acme")
		pj := &store.Project{OrgID: o.ID, Name: "web", Budget: store.Budget{Amount: 5_000_000_000, Period: store.PeriodWeek}}
		if err := s.CreateProject(ctx, pj); err != nil {
			t.Fatal(err)
		}
		pv := &store.Provider{OrgID: o.ID, Slug: "p", Name: "p", Kind: "openai", BaseURL: "http://x/v1",
			Settings: store.ProviderSettings{Prices: &store.Prices{Input: 150000, Output: 600000}}}
		if err := s.CreateProvider(ctx, pv); err != nil {
			t.Fatal(err)
		}
		r := &store.Route{ProjectID: pj.ID, Model: "m", Strategy: "weighted", Targets: []store.Target{
			{ProviderID: pv.ID, Weight: 1},
			{ProviderID: pv.ID, UpstreamModel: "big", Weight: 1, Prices: &store.Prices{Input: 3_000_000, Output: 0}},
		}}
		if err := s.CreateRoute(ctx, r); err != nil {
			t.Fatal(err)
		}
		k := &store.VirtualKey{ProjectID: pj.ID, Name: "alice", Lookup: "lk1", Hash: mustHash(t),
			Budget: store.Budget{Amount: 10, Period: store.PeriodDay}}
		if err := s.CreateVirtualKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		st, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Providers[0].Settings.Prices; got == nil || *got != (store.Prices{Input: 150000, Output: 600000}) {
			t.Errorf("provider prices = %+v", got)
		}
		if tg := st.Routes[0].Targets; tg[0].Prices != nil || tg[1].Prices == nil || *tg[1].Prices != (store.Prices{Input: 3_000_000}) {
			t.Errorf("target prices = %+v %+v", tg[0].Prices, tg[1].Prices)
		}
		if b := st.VirtualKeys[0].Budget; b != k.Budget {
			t.Errorf("key budget = %+v", b)
		}
		if b := st.Projects[0].Budget; b != pj.Budget {
			t.Errorf("project budget = %+v", b)
		}
		pj.Budget = store.Budget{}
		if err := s.UpdateProject(ctx, pj); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetProject(ctx, o.ID, "web"); got.Budget != (store.Budget{}) {
			t.Errorf("cleared budget = %+v", got.Budget)
		}
	})
}

// TestSummarizeUsage checks the SQL aggregation against sums computed here
// from the same rows, on both stores.
func TestSummarizeUsage(t *testing.T) {
	storetest.Each(t, func(t *testing.T, dialect string) {
		ctx := context.Background()
		s := storetest.Open(t, dialect, nil)
		o := mustOrg(t, s, "acme")
		other := mustOrg(t, s, "other")
		pj := mustProject(t, s, o.ID, "web")
		pj2 := mustProject(t, s, other.ID, "web")
		var keys []*store.VirtualKey
		for i, c := range []struct {
			project int64
			name    string
		}{{pj.ID, "alice"}, {pj.ID, "bob"}, {pj.ID, "alice"}, {pj2.ID, "alice"}} {
			k := &store.VirtualKey{ProjectID: c.project, Name: c.name, Lookup: "l" + string(rune('a'+i)), Hash: mustHash(t)}
			if err := s.CreateVirtualKey(ctx, k); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, k)
		}
		day := time.Date(2025, 3, 10, 0, 0, 0, 0, time.UTC)
		rec := func(at time.Time, key *store.VirtualKey, org int64, model, provider string, pt, ct int, cost *money.Amount) store.UsageRecord {
			return store.UsageRecord{CreatedAt: at, OrgID: org, ProjectID: key.ProjectID, KeyID: key.ID, AddressKind: "route",
				Address: model, Route: model, ProviderSlug: provider, Status: 200, PromptTokens: pt, CompletionTokens: ct, Cost: cost}
		}
		recs := []store.UsageRecord{
			rec(day.Add(1*time.Hour), keys[0], o.ID, "x", "p", 100, 10, amount(1000)),
			rec(day.Add(1*time.Hour+30*time.Minute), keys[0], o.ID, "x", "p", 200, 20, amount(2000)),
			rec(day.Add(2*time.Hour), keys[0], o.ID, "y", "q", 50, 5, nil), // unpriced
			rec(day.Add(25*time.Hour), keys[2], o.ID, "x", "p", 7, 3, amount(70)),
			rec(day.Add(3*time.Hour), keys[1], o.ID, "x", "p", 1, 1, amount(1)),
			rec(day.Add(1*time.Hour), keys[3], other.ID, "x", "p", 999, 999, amount(999)), // another org
			rec(day.Add(-time.Nanosecond), keys[0], o.ID, "x", "p", 5, 5, amount(5)),      // the day before
		}
		if err := s.InsertUsage(ctx, recs); err != nil {
			t.Fatal(err)
		}

		// "How many tokens did alice use on March 10 on model x, and what did
		// they cost": both alice keys, one day, one model.
		got, err := s.SummarizeUsage(ctx, store.UsageFilter{OrgID: o.ID, KeyName: "alice", Model: "x",
			Since: day, Until: day.AddDate(0, 0, 1)}, nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		want := []store.UsageGroup{{Requests: 2, PromptTokens: 300, CompletionTokens: 30, Cost: 3000, Priced: 2}}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("alice on x, March 10:\n got %+v\nwant %+v", got, want)
		}

		got, err = s.SummarizeUsage(ctx, store.UsageFilter{OrgID: o.ID, Since: day}, []string{store.GroupKey, store.GroupDay}, 10)
		if err != nil {
			t.Fatal(err)
		}
		d2 := day.AddDate(0, 0, 1)
		want = []store.UsageGroup{
			{KeyID: keys[0].ID, KeyName: "alice", Bucket: day, Requests: 3, PromptTokens: 350, CompletionTokens: 35, Cost: 3000, Priced: 2, Unpriced: 1},
			{KeyID: keys[1].ID, KeyName: "bob", Bucket: day, Requests: 1, PromptTokens: 1, CompletionTokens: 1, Cost: 1, Priced: 1},
			{KeyID: keys[2].ID, KeyName: "alice", Bucket: d2, Requests: 1, PromptTokens: 7, CompletionTokens: 3, Cost: 70, Priced: 1},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("by key and day:\n got %+v\nwant %+v", got, want)
		}

		got, err = s.SummarizeUsage(ctx, store.UsageFilter{OrgID: o.ID, Provider: "p", Since: day, Until: d2},
			[]string{store.GroupHour, store.GroupProject, store.GroupRoute}, 10)
		if err != nil {
			t.Fatal(err)
		}
		want = []store.UsageGroup{
			{ProjectID: pj.ID, ProjectName: "web", Route: "x", Bucket: day.Add(time.Hour), Requests: 2, PromptTokens: 300, CompletionTokens: 30, Cost: 3000, Priced: 2},
			{ProjectID: pj.ID, ProjectName: "web", Route: "x", Bucket: day.Add(3 * time.Hour), Requests: 1, PromptTokens: 1, CompletionTokens: 1, Cost: 1, Priced: 1},
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("by hour, project and route:\n got %+v\nwant %+v", got, want)
		}

		// The limit bounds the groups returned.
		if got, err = s.SummarizeUsage(ctx, store.UsageFilter{OrgID: o.ID}, []string{store.GroupModel, store.GroupProvider}, 1); err != nil || len(got) != 1 {
			t.Fatalf("limit 1: %d groups, %v", len(got), err)
		}
		if _, err := s.SummarizeUsage(ctx, store.UsageFilter{OrgID: o.ID}, []string{"nope"}, 1); err == nil {
			t.Fatal("an unknown dimension was accepted")
		}

		// SpentSince: a key's and a project's cost since an instant.
		if v, err := s.SpentSince(ctx, keys[0].ID, 0, day); err != nil || v != 3000 {
			t.Fatalf("key spent = %d, %v", v, err)
		}
		if v, err := s.SpentSince(ctx, 0, pj.ID, day); err != nil || v != 3071 {
			t.Fatalf("project spent = %d, %v", v, err)
		}
		// Costs read back, nil stays nil.
		rows, err := s.ListUsage(ctx, store.UsageFilter{OrgID: o.ID, Model: "y"}, store.Page{})
		if err != nil || len(rows) != 1 || rows[0].Cost != nil {
			t.Fatalf("unpriced row = %+v, %v", rows, err)
		}
	})
}

func mustHash(t *testing.T) secret.Hash {
	t.Helper()
	tok, _ := secret.Mint(secret.PrefixVirtualKey)
	return secret.HashOf(tok.Reveal())
}
