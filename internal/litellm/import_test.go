package litellm_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/litellm"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
)

// harness is a real store with the Service the importer writes through.
type harness struct {
	db   *sqlstore.DB
	svc  *admin.Service
	snap *snapshot.Holder
	logs *bytes.Buffer
}

func newHarness(t *testing.T, dialect string, master string) *harness {
	t.Helper()
	sealer, err := secret.NewSealer(secret.New(master))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{db: storetest.Open(t, dialect, sealer), logs: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(h.logs, nil))
	snap := snapshot.NewHolder(h.db, log)
	if err := snap.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.svc, h.snap = admin.NewService(h.db, snap, log), snap
	return h
}

// each runs fn on every store dialect, once with provider secrets sealed
// under a master key, since recognising earlier imports reads them back.
func each(t *testing.T, fn func(t *testing.T, h *harness)) {
	storetest.EachWith(t, func(t *testing.T, d string) *harness { return newHarness(t, d, "") }, fn)
	t.Run("sqlite-sealed", func(t *testing.T) {
		fn(t, newHarness(t, "sqlite", "5dbe21dce6b133fc9be41e2a8b54b04db1af20adce1228c302512404e8f32776"))
	})
}

func (h *harness) run(t *testing.T, cfg *litellm.Config, opts litellm.Options) string {
	t.Helper()
	var out bytes.Buffer
	if err := litellm.Run(context.Background(), h.db, h.svc, cfg, opts, &out); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	assertNoSecrets(t, "output", out.String())
	assertNoSecrets(t, "log", h.logs.String())
	return out.String()
}

// state is the org's providers and the project's routes, read back.
type provRow struct{ Slug, Name, Kind, BaseURL, Key string }

func (h *harness) providers(t *testing.T, org string) []provRow {
	t.Helper()
	st, err := h.db.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var orgID int64
	for _, o := range st.Orgs {
		if o.Name == org {
			orgID = o.ID
		}
	}
	var out []provRow
	for _, p := range st.Providers {
		if p.OrgID != orgID || p.DeletedAt != nil {
			continue
		}
		var keys []string
		for _, k := range p.Keys {
			keys = append(keys, k.Secret.Reveal())
		}
		out = append(out, provRow{p.Slug, p.Name, p.Kind, p.BaseURL, strings.Join(keys, "+")})
	}
	return out
}

func (h *harness) routes(t *testing.T, org, project string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	o, err := h.db.GetOrg(ctx, org)
	if err != nil {
		t.Fatal(err)
	}
	pj, err := h.db.GetProject(ctx, o.ID, project)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := h.db.ListRoutes(ctx, pj.ID, store.Page{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, r := range rs {
		for _, tg := range r.Targets {
			out[r.Model] = append(out[r.Model], fmt.Sprintf("%s/%s*%d", tg.ProviderSlug, tg.UpstreamModel, tg.Weight))
		}
	}
	return out
}

func (h *harness) counts(t *testing.T) (orgs, providers, routes int) {
	t.Helper()
	st, err := h.db.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(st.Orgs), len(st.Providers), len(st.Routes)
}

// report parses the slug report lines of out.
func report(t *testing.T, out string) [][]string {
	t.Helper()
	_, rest, ok := strings.Cut(out, litellm.ReportHeader+"\n")
	if !ok {
		return nil
	}
	var lines []string
	for _, l := range strings.Split(rest, "\n") {
		if strings.HasPrefix(l, "created ") || strings.HasPrefix(l, "dry run:") || l == "" {
			break
		}
		lines = append(lines, l)
	}
	r := csv.NewReader(strings.NewReader(strings.Join(lines, "\n")))
	r.TrimLeadingSpace = true
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatalf("report is not CSV: %v\n%s", err, out)
	}
	return recs
}

var (
	wantProviders = []provRow{
		{"openai-api-openai-com-v1", "openai api.openai.com/v1", "openai", "https://api.openai.com/v1", openAIKey},
		{"openai-api-openai-com-v1-2", "openai api.openai.com/v1", "openai", "https://api.openai.com/v1", secondKey},
		{"vllm-10-0-0-5-8000-v1", "vllm 10.0.0.5:8000/v1", "vllm", "http://10.0.0.5:8000/v1", vllmKey},
		{"vllm-10-0-0-6-8000-v1", "vllm 10.0.0.6:8000/v1", "vllm", "http://10.0.0.6:8000/v1", ""},
		{"anthropic-api-anthropic-com-v1", "anthropic api.anthropic.com/v1", "anthropic", "https://api.anthropic.com/v1", anthropicKey},
		{"llamacpp-gpu-3-lan-8080-v1", "llamacpp gpu-3.lan:8080/v1", "llamacpp", "http://gpu-3.lan:8080/v1", ""},
	}
	wantRoutes = map[string][]string{
		"gpt-4o":        {"openai-api-openai-com-v1/gpt-4o*1", "openai-api-openai-com-v1-2/gpt-4o*2"},
		"qwen3":         {"vllm-10-0-0-5-8000-v1/Qwen/Qwen3-8B*1", "vllm-10-0-0-6-8000-v1/Qwen/Qwen3-8B*3"},
		"claude-sonnet": {"anthropic-api-anthropic-com-v1/claude-sonnet-4-5*1"},
		"gpt-4o-mini":   {"openai-api-openai-com-v1-2/gpt-4o-mini*1"},
		"llama":         {"llamacpp-gpu-3-lan-8080-v1/llama-3.1-8b*1"},
	}
)

func TestImportFreshThenAgain(t *testing.T) {
	cfg := parseFile(t, "testdata/litellm.yaml")
	each(t, func(t *testing.T, h *harness) {
		out := h.run(t, cfg, litellm.Options{})
		if got := h.providers(t, "default"); !reflect.DeepEqual(got, wantProviders) {
			t.Errorf("providers:\n got %+v\nwant %+v", got, wantProviders)
		}
		if got := h.routes(t, "default", "default"); !reflect.DeepEqual(got, wantRoutes) {
			t.Errorf("routes:\n got %v\nwant %v", got, wantRoutes)
		}
		for _, w := range []string{
			"created org default\n",
			"created project default/default\n",
			"created provider openai-api-openai-com-v1-2: kind openai, base_url https://api.openai.com/v1, 1 key\n",
			"created provider vllm-10-0-0-6-8000-v1: kind vllm, base_url http://10.0.0.6:8000/v1, no key\n",
			"created route qwen3: vllm-10-0-0-5-8000-v1/Qwen/Qwen3-8B weight 1, vllm-10-0-0-6-8000-v1/Qwen/Qwen3-8B weight 3\n",
			"created 6 providers, 5 routes; skipped 0 providers, 0 routes (already present)\n",
		} {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
		p2, err := h.db.GetProvider(context.Background(), mustOrg(t, h, "default").ID, "openai-api-openai-com-v1-2")
		if err != nil {
			t.Fatal(err)
		}
		wantReport := [][]string{{"default", fmt.Sprint(p2.ID), "openai api.openai.com/v1", "openai-api-openai-com-v1", "openai-api-openai-com-v1-2"}}
		if got := report(t, out); !reflect.DeepEqual(got, wantReport) {
			t.Errorf("report:\n got %q\nwant %q\n%s", got, wantReport, out)
		}

		// Again: everything is recognised, nothing is created or adjusted.
		again := h.run(t, cfg, litellm.Options{})
		if strings.Contains(again, litellm.ReportHeader) || strings.Contains(again, "created provider") || strings.Contains(again, "created route") {
			t.Errorf("second run created or adjusted something:\n%s", again)
		}
		if !strings.HasSuffix(again, "created 0 providers, 0 routes; skipped 6 providers, 5 routes (already present)\n") {
			t.Errorf("second run summary:\n%s", again)
		}
		if got := h.providers(t, "default"); !reflect.DeepEqual(got, wantProviders) {
			t.Errorf("providers after the second run:\n got %+v", got)
		}
	})
}

func mustOrg(t *testing.T, h *harness, name string) *store.Org {
	t.Helper()
	o, err := h.db.GetOrg(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestImportDryRunWritesNothing(t *testing.T) {
	cfg := parseFile(t, "testdata/litellm.yaml")
	each(t, func(t *testing.T, h *harness) {
		out := h.run(t, cfg, litellm.Options{DryRun: true, Org: "acme", Project: "web"})
		if o, p, r := h.counts(t); o != 0 || p != 0 || r != 0 {
			t.Errorf("dry run wrote: %d orgs, %d providers, %d routes", o, p, r)
		}
		for _, w := range []string{
			"would create org acme\n",
			"would create project acme/web\n",
			"would create provider openai-api-openai-com-v1: kind openai, base_url https://api.openai.com/v1, 1 key\n",
			"would create route gpt-4o: openai-api-openai-com-v1/gpt-4o weight 1, openai-api-openai-com-v1-2/gpt-4o weight 2\n",
			"dry run: would create 6 providers, 5 routes; would skip 0 providers, 0 routes (already present); nothing written\n",
		} {
			if !strings.Contains(out, w) {
				t.Errorf("dry run output lacks %q:\n%s", w, out)
			}
		}
		want := [][]string{{"acme", "-", "openai api.openai.com/v1", "openai-api-openai-com-v1", "openai-api-openai-com-v1-2"}}
		if got := report(t, out); !reflect.DeepEqual(got, want) {
			t.Errorf("dry run report %q, want %q", got, want)
		}

		// The dry run predicts the real run exactly, apart from ids.
		real := h.run(t, cfg, litellm.Options{Org: "acme", Project: "web"})
		norm := func(s string) string {
			s = strings.ReplaceAll(s, "would create", "created")
			s = strings.ReplaceAll(s, "acme, -,", "acme, ID,")
			if i := strings.LastIndex(s, "\n"); i >= 0 {
				s = s[:strings.LastIndex(s[:i], "\n")+1] // drop the summary
			}
			return s
		}
		id := fmt.Sprint(mustProvider(t, h, "acme", "openai-api-openai-com-v1-2").ID)
		if a, b := norm(out), strings.ReplaceAll(norm(real), "acme, "+id+",", "acme, ID,"); a != b {
			t.Errorf("dry run and real run differ:\n%s\n---\n%s", a, b)
		}
	})
}

func mustProvider(t *testing.T, h *harness, org, slug string) *store.Provider {
	t.Helper()
	p, err := h.db.GetProvider(context.Background(), mustOrg(t, h, org).ID, slug)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestImportAroundExisting: providers, a soft-deleted provider, a group and
// a route already in the org shape the backfill, and nothing existing is
// changed.
func TestImportAroundExisting(t *testing.T) {
	cfg := parseFile(t, "testdata/litellm.yaml")
	each(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		must := func(_ any, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(h.svc.CreateOrg(ctx, admin.OrgInput{Name: "default"}))
		must(h.svc.CreateProject(ctx, "default", admin.ProjectInput{Name: "default"}))
		// Claimant 1 of the OpenAI base, with another key: kept, and the
		// file's two OpenAI providers become claimants 2 and 3.
		must(h.svc.CreateProvider(ctx, "default", admin.ProviderInput{Name: "openai api.openai.com/v1", Kind: "openai",
			BaseURL: "https://api.openai.com/v1", Keys: []admin.KeyInput{{Secret: secret.New("sk-someone-else")}}}))
		// base-2 is held by a group: claimant 2 moves on to -3, and
		// claimant 3 then finds -3 taken and gets -4.
		o := mustOrg(t, h, "default")
		if err := h.db.CreateGroup(ctx, &store.Group{OrgID: o.ID, Slug: "openai-api-openai-com-v1-2", Name: "g", Strategy: "weighted"}); err != nil {
			t.Fatal(err)
		}
		// The first vLLM box exists with the same key: recognised, reused.
		must(h.svc.CreateProvider(ctx, "default", admin.ProviderInput{Name: "vLLM Moscow", Slug: "vllm-msk", Kind: "vllm",
			BaseURL: "http://10.0.0.5:8000/v1/", Keys: []admin.KeyInput{{Secret: secret.New(vllmKey)}}}))
		// The second vLLM box was imported and soft-deleted: not reused,
		// and its slug stays reserved.
		must(h.svc.CreateProvider(ctx, "default", admin.ProviderInput{Name: "vllm 10.0.0.6:8000/v1", Kind: "vllm", BaseURL: "http://10.0.0.6:8000/v1"}))
		if err := h.db.SoftDeleteProvider(ctx, mustProvider(t, h, "default", "vllm-10-0-0-6-8000-v1").ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		// A route of the file exists already: left exactly as it is.
		must(h.svc.CreateRoute(ctx, "default", "default", admin.RouteInput{Model: "qwen3",
			Targets: []admin.TargetInput{{Provider: "vllm-msk", UpstreamModel: "qwen3-custom"}}}))

		out := h.run(t, cfg, litellm.Options{})
		ids := map[string]string{}
		for _, s := range []string{"openai-api-openai-com-v1-3", "openai-api-openai-com-v1-4", "vllm-10-0-0-6-8000-v1-2"} {
			ids[s] = fmt.Sprint(mustProvider(t, h, "default", s).ID)
		}
		want := [][]string{
			{"default", ids["openai-api-openai-com-v1-3"], "openai api.openai.com/v1", "openai-api-openai-com-v1", "openai-api-openai-com-v1-3"},
			{"default", ids["openai-api-openai-com-v1-4"], "openai api.openai.com/v1", "openai-api-openai-com-v1", "openai-api-openai-com-v1-4"},
			{"default", ids["vllm-10-0-0-6-8000-v1-2"], "vllm 10.0.0.6:8000/v1", "vllm-10-0-0-6-8000-v1", "vllm-10-0-0-6-8000-v1-2"},
		}
		if got := report(t, out); !reflect.DeepEqual(got, want) {
			t.Errorf("report:\n got %q\nwant %q\n%s", got, want, out)
		}
		for _, w := range []string{
			"provider vllm-msk exists (same kind, base_url and key): reused\n",
			"route qwen3 exists: left unchanged\n",
			"created route gpt-4o: openai-api-openai-com-v1-3/gpt-4o weight 1, openai-api-openai-com-v1-4/gpt-4o weight 2\n",
			"created 5 providers, 4 routes; skipped 1 providers, 1 routes (already present)\n",
		} {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
		if got := h.routes(t, "default", "default")["qwen3"]; !reflect.DeepEqual(got, []string{"vllm-msk/qwen3-custom*1"}) {
			t.Errorf("existing route changed: %v", got)
		}
		if strings.Contains(out, "created org") || strings.Contains(out, "created project") {
			t.Errorf("existing org or project reported as created:\n%s", out)
		}

		again := h.run(t, cfg, litellm.Options{})
		if strings.Contains(again, litellm.ReportHeader) || !strings.HasSuffix(again, "created 0 providers, 0 routes; skipped 6 providers, 5 routes (already present)\n") {
			t.Errorf("second run:\n%s", again)
		}
	})
}

// TestImportNoKey: entries without api_key match a provider without keys
// only, never one that holds a key.
func TestImportNoKey(t *testing.T) {
	y := "model_list:\n- model_name: a\n  litellm_params: {model: hosted_vllm/a, api_base: 'http://h:8000/v1'}\n"
	cfg, err := litellm.Parse([]byte(y), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	each(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		if _, err := h.svc.CreateOrg(ctx, admin.OrgInput{Name: "default"}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.svc.CreateProvider(ctx, "default", admin.ProviderInput{Name: "keyed", Kind: "vllm", BaseURL: "http://h:8000/v1",
			Keys: []admin.KeyInput{{Secret: secret.New(secondKey)}}}); err != nil {
			t.Fatal(err)
		}
		out := h.run(t, cfg, litellm.Options{})
		if !strings.Contains(out, "created provider vllm-h-8000-v1: kind vllm, base_url http://h:8000/v1, no key\n") {
			t.Errorf("output:\n%s", out)
		}
		if again := h.run(t, cfg, litellm.Options{}); !strings.Contains(again, "provider vllm-h-8000-v1 exists") {
			t.Errorf("second run:\n%s", again)
		}
	})
}

func TestImportEmptyModelList(t *testing.T) {
	cfg, err := litellm.Parse([]byte("model_list: []\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	each(t, func(t *testing.T, h *harness) {
		out := h.run(t, cfg, litellm.Options{})
		if out != "created 0 providers, 0 routes; skipped 0 providers, 0 routes (already present)\n" {
			t.Errorf("output:\n%s", out)
		}
		if o, p, r := h.counts(t); o+p+r != 0 {
			t.Errorf("an empty model_list wrote %d orgs, %d providers, %d routes", o, p, r)
		}
	})
}

// TestImportRebuildsPerStep: an import rebuilds the snapshot once per step
// of Plan.Apply (the providers, their import records, the routes), however
// many entries the file has (issue 21), and a re-run that writes nothing
// rebuilds nothing.
func TestImportRebuildsPerStep(t *testing.T) {
	cfg := parseFile(t, "testdata/litellm.yaml")
	each(t, func(t *testing.T, h *harness) {
		before := h.snap.Rebuilds()
		h.run(t, cfg, litellm.Options{})
		if n := h.snap.Rebuilds() - before; n != 3 {
			t.Errorf("%d snapshot rebuilds for an import of 6 providers and 5 routes, want 3 (one per step)", n)
		}
		if _, o, _ := h.counts(t); o != 6 {
			t.Errorf("%d providers after the import, want 6", o)
		}
		before = h.snap.Rebuilds()
		h.run(t, cfg, litellm.Options{})
		if n := h.snap.Rebuilds() - before; n != 0 {
			t.Errorf("%d snapshot rebuilds for a re-run that writes nothing, want 0", n)
		}
	})
}
