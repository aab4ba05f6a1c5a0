package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

// The end-to-end behaviour of apply (idempotence, dry run, prune, a failure
// midway, export round trip, the slug rule) is tested through the CLI
// against a real gateway (package cli). These tests pin what the engine
// does beneath: pool keys, announcements, the fleet's share, matching.

type applyEnv struct {
	db      *sqlstore.DB
	svc     *admin.Service
	commits int
}

func newApplyEnv(t *testing.T, dialect string) *applyEnv {
	e := &applyEnv{db: storetest.Open(t, dialect, nil)}
	e.svc = admin.NewService(e.db, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	e.svc.SetPublisher(func(context.Context) { e.commits++ })
	return e
}

func (e *applyEnv) apply(t *testing.T, d admin.Desired, opt admin.ApplyOptions) admin.ApplyResult {
	t.Helper()
	res, err := e.svc.Apply(context.Background(), d, opt)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return res
}

func intp(n int) *int { return &n }

func keyed(ref, sec string, weight int) admin.KeyInput {
	return admin.KeyInput{Ref: ref, Secret: secret.New(sec), Weight: intp(weight)}
}

func oneProvider(keys ...admin.KeyInput) admin.Desired {
	return admin.Desired{Orgs: []admin.DesiredOrg{{OrgInput: admin.OrgInput{Name: "acme"},
		Providers: []admin.DesiredProvider{{ProviderInput: admin.ProviderInput{Slug: "openai", Kind: "openai",
			BaseURL: "https://api.openai.com/v1", Keys: keys}}}}}}
}

// change finds the one change of kind and name.
func change(t *testing.T, res admin.ApplyResult, kind, name string) admin.Change {
	t.Helper()
	for _, c := range res.Changes {
		if c.Kind == kind && c.Name == name {
			return c
		}
	}
	t.Fatalf("no change for %s %s in %+v", kind, name, res.Changes)
	return admin.Change{}
}

// Pool keys are known by their secret: a weight or ref is changed in
// place (the key keeps its id), a new secret is added and the one the file
// no longer has removed. Secrets never reach the plan.
func TestApplyKeyPool(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		e := newApplyEnv(t, d)
		const k1, k2, k3 = "sk-FAKE-pool-0001", "sk-FAKE-pool-0002", "sk-FAKE-pool-0003"
		e.apply(t, oneProvider(keyed("K1", k1, 1), keyed("K2", k2, 1)), admin.ApplyOptions{})
		before, err := e.svc.GetProvider(ctx, "acme", "openai")
		if err != nil {
			t.Fatal(err)
		}

		// K2 is rotated (new secret, same variable), K1 re-weighted and
		// recorded under a new name.
		res := e.apply(t, oneProvider(keyed("K1_RENAMED", k1, 5), keyed("K2", k3, 1)), admin.ApplyOptions{})
		c := change(t, res, admin.KindProvider, "acme/openai")
		got := map[string]string{}
		for _, f := range c.Fields {
			got[f.Field] = f.Old + " -> " + f.New
		}
		want := map[string]string{
			"keys[K1_RENAMED].weight": "1 -> 5",
			"keys[K1_RENAMED].ref":    `"K1" -> "K1_RENAMED"`,
			"keys[K2]":                " -> added, weight 1",
		}
		want["keys[id "+jsonNum(before.Keys[1].ID)+"]"] = "ref K2, weight 1 -> removed"
		if c.Action != admin.ActionUpdate || len(got) != len(want) {
			t.Fatalf("change = %+v, want the fields %v", c, want)
		}
		for f, w := range want {
			if got[f] != w {
				t.Errorf("%s: %q, want %q", f, got[f], w)
			}
		}
		raw, _ := json.Marshal(res)
		testkit.AssertNoSecrets(t, "the plan", string(raw), k1, k2, k3)

		after, err := e.svc.GetProvider(ctx, "acme", "openai")
		if err != nil {
			t.Fatal(err)
		}
		if len(after.Keys) != 2 || after.Keys[0].ID != before.Keys[0].ID || after.Keys[0].Weight != 5 || after.Keys[0].Ref != "K1_RENAMED" ||
			after.Keys[1].Ref != "K2" || after.Keys[1].ID == before.Keys[1].ID {
			t.Fatalf("keys after = %+v (before %+v)", after.Keys, before.Keys)
		}
		state, err := e.db.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s := state.Providers[0].Keys[1].Secret.Reveal(); s != k3 {
			t.Fatal("the rotated key does not hold the new secret")
		}

		// A dry run without a secret takes the key its ref names; without
		// such a key it does not compare the pool at all.
		res = e.apply(t, oneProvider(admin.KeyInput{Ref: "K1_RENAMED", Weight: intp(5)}, admin.KeyInput{Ref: "K2", Weight: intp(1)}),
			admin.ApplyOptions{DryRun: true})
		if c := change(t, res, admin.KindProvider, "acme/openai"); c.Action != admin.ActionUnchanged || len(c.Notes) != 2 {
			t.Fatalf("dry run by ref = %+v", c)
		}
		res = e.apply(t, oneProvider(admin.KeyInput{Ref: "OTHER", Weight: intp(1)}), admin.ApplyOptions{DryRun: true})
		if c := change(t, res, admin.KindProvider, "acme/openai"); c.Action != admin.ActionUnchanged ||
			!strings.Contains(strings.Join(c.Notes, "\n"), "key pool not compared: no secret given for OTHER") {
			t.Fatalf("dry run with an unknown key = %+v", c)
		}
		// Without --dry-run a missing secret is the Service's refusal.
		_, err = e.svc.Apply(ctx, oneProvider(admin.KeyInput{Ref: "OTHER"}), admin.ApplyOptions{})
		if ae := admin.AsError(err); ae == nil || ae.Fields["orgs[0].providers[0].keys[0].secret"] != "is required" {
			t.Fatalf("apply without a secret: %v (%+v)", err, ae)
		}
	})
}

func jsonNum(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// An apply announces its writes once, after the commit; one that changes
// nothing, a dry run and a failure announce nothing.
func TestApplyAnnouncesOnce(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		e := newApplyEnv(t, d)
		full := oneProvider(keyed("K", "sk-FAKE-announce-1", 1))
		full.Orgs[0].Projects = []admin.DesiredProject{{ProjectInput: admin.ProjectInput{Name: "web"},
			Routes: []admin.RouteInput{{Model: "m", Targets: []admin.TargetInput{{Provider: "openai"}}}}}}
		for _, step := range []struct {
			name string
			d    admin.Desired
			opt  admin.ApplyOptions
			want int
		}{
			{"dry run", full, admin.ApplyOptions{DryRun: true}, 0},
			{"apply", full, admin.ApplyOptions{}, 1},
			{"again", full, admin.ApplyOptions{}, 1},
		} {
			e.apply(t, step.d, step.opt)
			if e.commits != step.want {
				t.Fatalf("after %s: %d announcements, want %d", step.name, e.commits, step.want)
			}
		}
		bad := full
		bad.Orgs = []admin.DesiredOrg{full.Orgs[0]}
		bad.Orgs[0].Description = "changed"
		bad.Orgs[0].Projects = []admin.DesiredProject{{ProjectInput: admin.ProjectInput{Name: "web"},
			Routes: []admin.RouteInput{{Model: "m", Targets: []admin.TargetInput{{Provider: "nope"}}}}}}
		_, err := e.svc.Apply(context.Background(), bad, admin.ApplyOptions{})
		var ae *admin.ApplyError
		if !errors.As(err, &ae) || ae.Entry != "orgs[0].projects[0].routes[0]" || !errors.Is(err, admin.ErrInvalid) {
			t.Fatalf("bad apply: %v", err)
		}
		if e.commits != 1 {
			t.Fatalf("a failed apply announced")
		}
		if o, _ := e.db.GetOrg(context.Background(), "acme"); o.Description != "" {
			t.Fatalf("the failed apply's org update stayed: %q", o.Description)
		}
	})
}

// What the fleet registered is the fleet's: a route an entry writes keeps
// its host targets, export leaves hosts' providers out, and prune deletes
// neither them nor the routes hosts serve. Hosts themselves are known by
// address; their project and model are their identity.
func TestApplyLeavesTheFleetAlone(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		e := newApplyEnv(t, d)
		recipe := fleetapi.Recipe{VLLM: &fleetapi.VLLM{Model: "Qwen/Qwen3-8B", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 16, DiskGB: 18}}
		base := admin.Desired{Orgs: []admin.DesiredOrg{{OrgInput: admin.OrgInput{Name: "acme"},
			Providers: []admin.DesiredProvider{{ProviderInput: admin.ProviderInput{Slug: "cloud", Kind: "vllm", BaseURL: "http://10.0.0.9:8000/v1"}}},
			Projects: []admin.DesiredProject{{ProjectInput: admin.ProjectInput{Name: "default"},
				Routes: []admin.RouteInput{{Model: "qwen3", Targets: []admin.TargetInput{{Provider: "cloud"}}}}}},
			Hosts: []admin.HostInput{{IP: "10.0.1.1", Port: 8000, ModelName: "qwen3", Recipe: recipe}},
		}}}
		res := e.apply(t, base, admin.ApplyOptions{})
		if c := change(t, res, admin.KindHost, "acme/10.0.1.1:8000"); c.Action != admin.ActionCreate || !strings.HasPrefix(c.Secret, secret.PrefixHostKey) {
			t.Fatalf("host create = %+v", c)
		}
		o, _ := e.db.GetOrg(ctx, "acme")
		hosts, err := e.db.ListHosts(ctx, o.ID, store.Page{Limit: 10})
		if err != nil || len(hosts) != 1 {
			t.Fatalf("hosts: %v %v", hosts, err)
		}
		// The host serves: the fleet adds its provider to the route.
		if err := e.db.RegisterHost(ctx, hosts[0].ID, store.HostRegistration{ServedModel: "Qwen/Qwen3-8B"}); err != nil {
			t.Fatal(err)
		}

		res = e.apply(t, base, admin.ApplyOptions{Prune: true})
		if res.Changed() {
			t.Fatalf("apply after the fleet registered the host: %+v", res.Changes)
		}
		pj, _ := e.db.GetProject(ctx, o.ID, "default")
		r, err := e.db.GetRoute(ctx, pj.ID, "qwen3")
		if err != nil || len(r.Targets) != 2 {
			t.Fatalf("route after apply: %+v %v", r, err)
		}
		exp, err := e.svc.Export(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if raw, _ := json.Marshal(exp); strings.Contains(string(raw), "host-") {
			t.Fatalf("the export names the host's provider: %s", raw)
		}
		if res := e.apply(t, exp, admin.ApplyOptions{Prune: true}); res.Changed() {
			t.Fatalf("export | apply --prune: %+v", res.Changes)
		}

		// A change of notes is an update; a change of model is refused by
		// the Service's own rule.
		base.Orgs[0].Hosts[0].Notes = "rack 4"
		if c := change(t, e.apply(t, base, admin.ApplyOptions{}), admin.KindHost, "acme/10.0.1.1:8000"); c.Action != admin.ActionUpdate {
			t.Fatalf("notes change = %+v", c)
		}
		base.Orgs[0].Hosts[0].ModelName = "other"
		_, err = e.svc.Apply(ctx, base, admin.ApplyOptions{})
		if ae := admin.AsError(err); ae == nil || ae.Code != admin.CodeImmutableField || ae.Fields["orgs[0].hosts[0].model_name"] == "" {
			t.Fatalf("model change: %v", err)
		}
	})
}

// A provider whose slug changed in the file is found by its name, and its
// rename needs allow_slug_change; two entries cannot name one slug.
func TestApplyMatching(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		e := newApplyEnv(t, d)
		named := func(name, slug string, allow bool) admin.Desired {
			return admin.Desired{Orgs: []admin.DesiredOrg{{OrgInput: admin.OrgInput{Name: "acme"},
				Providers: []admin.DesiredProvider{{ProviderInput: admin.ProviderInput{Name: name, Slug: slug, Kind: "vllm",
					BaseURL: "http://10.0.0.9:8000/v1"}, SlugChange: admin.SlugChange{AllowSlugChange: allow}}}}}}
		}
		e.apply(t, named("Box", "", false), admin.ApplyOptions{}) // slug "box", from the name
		_, err := e.svc.Apply(context.Background(), named("Box", "gpu-box", false), admin.ApplyOptions{DryRun: true})
		if ae := admin.AsError(err); ae == nil || ae.Code != admin.CodeSlugImmutable || !strings.Contains(ae.Message, `the provider "box" is "gpu-box" in this file`) {
			t.Fatalf("slug change by name: %v", err)
		}
		res := e.apply(t, named("Box", "gpu-box", true), admin.ApplyOptions{})
		if c := change(t, res, admin.KindProvider, "acme/gpu-box"); c.Action != admin.ActionUpdate || c.Fields[0].Field != "slug" {
			t.Fatalf("allowed rename = %+v", c)
		}
		// Another name is another provider.
		if c := change(t, e.apply(t, named("Box 2", "box", false), admin.ApplyOptions{DryRun: true}), admin.KindProvider, "acme/box"); c.Action != admin.ActionCreate {
			t.Fatalf("a new name = %+v", c)
		}

		twice := named("Box", "gpu-box", false)
		twice.Orgs[0].Groups = []admin.DesiredGroup{{GroupInput: admin.GroupInput{Slug: "gpu-box", Members: []admin.GroupMemberInput{{Provider: "gpu-box"}}}}}
		_, err = e.svc.Apply(context.Background(), twice, admin.ApplyOptions{})
		if ae := admin.AsError(err); ae == nil || ae.Fields["orgs[0].groups[0].slug"] != "repeats orgs[0].providers[0]; each entry may appear once" {
			t.Fatalf("a slug twice: %v", err)
		}
		if _, err := e.svc.Apply(context.Background(), twice, admin.ApplyOptions{CreateOnly: true, DryRun: true}); err == nil {
			t.Fatal("a create-only dry run was accepted")
		}
	})
}

// A group may name a provider the fleet registered for a host: apply
// keeps that member (compared without it), export leaves it out, and a
// group of fleet members alone is neither exported nor pruned.
func TestApplyKeepsGroupsFleetMembers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		e := newApplyEnv(t, d)
		recipe := fleetapi.Recipe{VLLM: &fleetapi.VLLM{Model: "Qwen/Qwen3-8B", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 16, DiskGB: 18}}
		base := admin.Desired{Orgs: []admin.DesiredOrg{{OrgInput: admin.OrgInput{Name: "acme"},
			Providers: []admin.DesiredProvider{{ProviderInput: admin.ProviderInput{Slug: "up", Kind: "vllm", BaseURL: "http://10.0.0.9:8000/v1"}}},
			Projects:  []admin.DesiredProject{{ProjectInput: admin.ProjectInput{Name: "default"}}},
			Hosts:     []admin.HostInput{{IP: "10.0.1.1", Port: 8000, ModelName: "qwen3", Recipe: recipe}},
		}}}
		e.apply(t, base, admin.ApplyOptions{})
		o, _ := e.db.GetOrg(ctx, "acme")
		hosts, err := e.db.ListHosts(ctx, o.ID, store.Page{Limit: 10})
		if err != nil || len(hosts) != 1 {
			t.Fatalf("hosts: %v %v", hosts, err)
		}
		if err := e.db.RegisterHost(ctx, hosts[0].ID, store.HostRegistration{ServedModel: "Qwen/Qwen3-8B"}); err != nil {
			t.Fatal(err)
		}
		hosts, _ = e.db.ListHosts(ctx, o.ID, store.Page{Limit: 10})
		fleet := hosts[0].ProviderSlug
		if fleet == "" {
			t.Fatal("the registered host has no provider")
		}
		for _, g := range []admin.GroupInput{
			{Slug: "g", Members: []admin.GroupMemberInput{{Provider: "up"}, {Provider: fleet, Weight: intp(3)}}},
			{Slug: "only", Members: []admin.GroupMemberInput{{Provider: fleet}}},
		} {
			if _, err := e.svc.CreateGroup(ctx, "acme", g); err != nil {
				t.Fatal(err)
			}
		}

		exp, err := e.svc.Export(ctx)
		if err != nil {
			t.Fatal(err)
		}
		groups := exp.Orgs[0].Groups
		if len(groups) != 1 || groups[0].Slug != "g" || len(groups[0].Members) != 1 || groups[0].Members[0].Provider != "up" {
			t.Fatalf("exported groups: %+v", groups)
		}
		if res := e.apply(t, exp, admin.ApplyOptions{Prune: true}); res.Changed() {
			t.Fatalf("export | apply --prune: %+v", res.Changes)
		}
		members := func(slug string) []admin.GroupMemberView {
			t.Helper()
			v, err := e.svc.GetGroup(ctx, "acme", slug)
			if err != nil {
				t.Fatalf("group %s: %v", slug, err)
			}
			return v.Members
		}
		if m := members("g"); len(m) != 2 || m[1].Provider != fleet || m[1].Weight != 3 {
			t.Fatalf("g after apply: %+v", m)
		}
		if m := members("only"); len(m) != 1 || m[0].Provider != fleet {
			t.Fatalf("only after apply: %+v", m)
		}

		// A change of the file's member is an update of it alone; the
		// fleet's member stays.
		exp.Orgs[0].Groups[0].Members[0].Weight = intp(5)
		c := change(t, e.apply(t, exp, admin.ApplyOptions{}), admin.KindGroup, "acme/g")
		if c.Action != admin.ActionUpdate || len(c.Fields) != 1 || c.Fields[0].Field != "members[0].weight" {
			t.Fatalf("weight change = %+v", c)
		}
		if m := members("g"); len(m) != 2 || m[0].Weight != 5 || m[1].Provider != fleet {
			t.Fatalf("g after the weight change: %+v", m)
		}
		// The group of fleet members alone can be re-applied as it is.
		only := exp
		only.Orgs = []admin.DesiredOrg{exp.Orgs[0]}
		only.Orgs[0].Groups = append(slices.Clone(exp.Orgs[0].Groups), admin.DesiredGroup{GroupInput: admin.GroupInput{Slug: "only", Members: []admin.GroupMemberInput{{Provider: fleet}}}})
		if res := e.apply(t, only, admin.ApplyOptions{Prune: true}); res.Changed() {
			t.Fatalf("re-apply of the fleet's group: %+v", res.Changes)
		}
	})
}
