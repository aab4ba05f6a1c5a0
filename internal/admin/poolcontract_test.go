package admin_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/readiness"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// modalities is a readiness view that knows only modalities, per
// provider id: what a probe would report.
type modalities map[int64][]string

func (m modalities) Status(id int64) (readiness.Status, bool) {
	mods, ok := m[id]
	return readiness.Status{Ready: ok, Facts: readiness.Facts{Modalities: mods}}, ok
}

func qwenRecipe(maxLen string) fleetapi.Recipe {
	return fleetapi.Recipe{VLLM: &fleetapi.VLLM{Model: "Qwen/Qwen3-8B", Source: fleetapi.Source{Kind: fleetapi.SourceHF},
		VRAMGB: 12, DiskGB: 18, Args: []string{"--max-model-len", maxLen}}}
}

func wantContract(t *testing.T, what string, err error, param, names string) {
	t.Helper()
	var ae *admin.Error
	if !errors.As(err, &ae) || !errors.Is(err, admin.ErrConflict) || ae.Code != admin.CodePoolContract ||
		!strings.Contains(ae.Message, param) || !strings.Contains(ae.Message, names) {
		t.Fatalf("%s: %v, want 409 pool_contract_mismatch on %s naming %s", what, err, param, names)
	}
}

// TestPoolContractCoversHandAddedTargets: design 002, "model_name is a
// contract with callers … if two routes share a model_name, their
// caller-visible parameters must match". A configured provider added by
// hand to a route whose model has fleet hosts is refused (409
// pool_contract_mismatch, naming the parameter) unless it serves the
// pool's model with its context and modalities, as far as rolter knows
// them; the same check runs when a host's recipe changes.
func TestPoolContractCoversHandAddedTargets(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		db := storetest.Open(t, d, nil)
		svc := admin.NewService(db, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
		mods := modalities{}
		svc.SetReadiness(mods)
		if _, err := svc.CreateOrg(ctx, admin.OrgInput{Name: "acme"}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.CreateProject(ctx, "acme", admin.ProjectInput{Name: "default"}); err != nil {
			t.Fatal(err)
		}
		host, err := svc.CreateHost(ctx, "acme", admin.HostInput{IP: "10.0.0.5", Port: 8000, ModelName: "qwen3", Recipe: qwenRecipe("32768")})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []admin.ProviderInput{
			{Slug: "same", Kind: "openai", BaseURL: "https://a.example/v1", ContextLimit: 32768},
			{Slug: "longer", Kind: "openai", BaseURL: "https://b.example/v1", ContextLimit: 131072},
			{Slug: "unknown-ctx", Kind: "openai", BaseURL: "https://c.example/v1"},
		} {
			if _, err := svc.CreateProvider(ctx, "acme", p); err != nil {
				t.Fatal(err)
			}
		}
		route := func(targets ...admin.TargetInput) error {
			_, err := svc.CreateRoute(ctx, "acme", "default", admin.RouteInput{Model: "qwen3", Targets: targets})
			return err
		}
		wantContract(t, "another model", route(admin.TargetInput{Provider: "same", UpstreamModel: "gpt-4o"}), "served model name", `"gpt-4o"`)
		wantContract(t, "the route's name as the model", route(admin.TargetInput{Provider: "same"}), "served model name", `"qwen3"`)
		wantContract(t, "a longer context", route(admin.TargetInput{Provider: "longer", UpstreamModel: "Qwen/Qwen3-8B"}), "context", "131072")
		wantContract(t, "a target's own context", route(admin.TargetInput{Provider: "same", UpstreamModel: "Qwen/Qwen3-8B", ContextLimit: 8192}), "context", "8192")
		if _, err := db.GetRoute(ctx, mustProjectID(t, db), "qwen3"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a refused route was written: %v", err)
		}
		// Matching, or with a context rolter does not know: accepted.
		if err := route(admin.TargetInput{Provider: "same", UpstreamModel: "Qwen/Qwen3-8B"},
			admin.TargetInput{Provider: "unknown-ctx", UpstreamModel: "Qwen/Qwen3-8B"}); err != nil {
			t.Fatalf("matching targets: %v", err)
		}
		// An edit that adds a mismatch is refused; one that keeps the
		// targets as they are is not judged again.
		_, err = svc.PatchRoute(ctx, "acme", "default", "qwen3", admin.RoutePatch{Targets: &[]admin.TargetInput{
			{Provider: "same", UpstreamModel: "Qwen/Qwen3-8B"}, {Provider: "longer", UpstreamModel: "Qwen/Qwen3-8B"}}})
		wantContract(t, "patch adds a longer context", err, "context", `"longer"`)
		strategy := "round_robin"
		if _, err := svc.PatchRoute(ctx, "acme", "default", "qwen3", admin.RoutePatch{Strategy: &strategy}); err != nil {
			t.Fatalf("patch without new targets: %v", err)
		}

		// Modalities, once probes report them on both sides.
		o, _ := db.GetOrg(ctx, "acme")
		hs, err := db.ListPoolHosts(ctx, o.ID, mustProjectID(t, db), "qwen3")
		if err != nil || len(hs) != 1 {
			t.Fatalf("pool hosts: %v %v", hs, err)
		}
		if err := db.RegisterHost(ctx, host.ID, store.HostRegistration{ServedModel: "Qwen/Qwen3-8B", ContextLimit: 32768}); err != nil {
			t.Fatal(err)
		}
		h, err := db.GetHost(ctx, hs[0].OrgID, host.ID)
		if err != nil || h.ProviderID == 0 {
			t.Fatalf("registered host: %+v %v", h, err)
		}
		vision, err := svc.CreateProvider(ctx, "acme", admin.ProviderInput{Slug: "vision", Kind: "openai", BaseURL: "https://d.example/v1"})
		if err != nil {
			t.Fatal(err)
		}
		vp, _ := db.GetProvider(ctx, hs[0].OrgID, vision.Slug)
		mods[h.ProviderID], mods[vp.ID] = []string{"text"}, []string{"text", "image"}
		_, err = svc.PatchRoute(ctx, "acme", "default", "qwen3", admin.RoutePatch{Targets: &[]admin.TargetInput{
			{Provider: "same", UpstreamModel: "Qwen/Qwen3-8B"}, {Provider: "vision", UpstreamModel: "Qwen/Qwen3-8B"}}})
		wantContract(t, "other modalities", err, "modalities", "image,text")

		// A host's recipe change meets the hand-added targets.
		id := strconv.FormatInt(host.ID, 10)
		r := qwenRecipe("40960")
		_, err = svc.PatchHost(ctx, "acme", id, admin.HostPatch{Recipe: &r})
		wantContract(t, "recipe with a longer context", err, "context", `"same"`)
		if back, _ := db.GetHost(ctx, hs[0].OrgID, host.ID); fleetMaxLen(back) != "32768" {
			t.Fatalf("a refused recipe was written: %v", back.Recipe.VLLM.Args)
		}
		r = qwenRecipe("32768")
		r.VLLM.Args = append(r.VLLM.Args, "--gpu-memory-utilization", "0.8") // tuning may differ
		if _, err := svc.PatchHost(ctx, "acme", id, admin.HostPatch{Recipe: &r}); err != nil {
			t.Fatalf("a tuning change: %v", err)
		}
	})
}

func mustProjectID(t *testing.T, db store.Store) int64 {
	t.Helper()
	ctx := context.Background()
	o, err := db.GetOrg(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	p, err := db.GetProject(ctx, o.ID, "default")
	if err != nil {
		t.Fatal(err)
	}
	return p.ID
}

func fleetMaxLen(h *store.Host) string {
	v, _ := fleetapi.FlagValue(h.Recipe.VLLM.Args, "--max-model-len")
	return v
}
