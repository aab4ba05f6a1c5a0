package bench

import (
	"context"
	"fmt"

	"github.com/rolter/rolter/internal/demo"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
)

// Names the bench gives its resources. The org and project are the ones
// `rolter serve` creates on first start, so the bench's catalog lives where
// a newcomer's would.
const (
	orgName      = "default"
	projectName  = "default"
	mockSlug     = "bench-mock"
	benchRoute   = "bench"
	upstreamName = demo.ModelID // the model the mock advertises
)

// maxFillerProviders caps the providers (and so slugs) created for a large
// catalog: the scale is 10,000 providers whatever the route count.
const maxFillerProviders = 10000

// seed writes a catalog of routes-1 filler routes over min(routes-1,
// 10,000) filler providers into a fresh SQLite store in dataDir, before
// `rolter serve` opens it. The bench route itself is created later through
// the admin API, as an operator would.
//
// It writes through the store, not the admin API or a --config import:
// both publish a new snapshot after every write, so importing 100,000
// routes that way costs 100,000 rebuilds. No request is sent to the
// fillers; they make the tables the request path searches large. Their
// providers point at baseURL (the mock), so that the gateway's background
// work for them (health probes) is that of healthy upstreams, and it is
// measured with the rest.
func seed(ctx context.Context, dataDir, baseURL string, routes int) error {
	db, err := sqlstore.Open(ctx, "sqlite", dataDir, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	// A throwaway store need not survive a power cut; without this every
	// row waits for an fsync. The store keeps one connection, so the
	// setting holds for all the writes below.
	if _, err := db.SQL().ExecContext(ctx, "PRAGMA synchronous=OFF"); err != nil {
		return err
	}
	org := &store.Org{Name: orgName, Description: "created by rolter bench"}
	if err := db.CreateOrg(ctx, org); err != nil {
		return err
	}
	proj := &store.Project{OrgID: org.ID, Name: projectName, Description: "created by rolter bench"}
	if err := db.CreateProject(ctx, proj); err != nil {
		return err
	}
	fillers := routes - 1
	providers := make([]int64, min(fillers, maxFillerProviders))
	for i := range providers {
		p := &store.Provider{OrgID: org.ID, Slug: fmt.Sprintf("filler-%05d", i), Name: fmt.Sprintf("filler %d", i),
			Kind: store.KindVLLM, BaseURL: baseURL, MetadataSource: store.MetadataConfigured,
			Keys: []store.ProviderKey{{Secret: secret.New(fmt.Sprintf("sk-filler-%05d", i)), Weight: 1}}}
		if err := db.CreateProvider(ctx, p); err != nil {
			return fmt.Errorf("seed provider %d: %w", i, err)
		}
		providers[i] = p.ID
	}
	for i := range fillers {
		r := &store.Route{ProjectID: proj.ID, Model: fmt.Sprintf("filler-model-%06d", i), Strategy: "weighted",
			Targets: []store.Target{{ProviderID: providers[i%len(providers)], UpstreamModel: "m", Weight: 1}}}
		if err := db.CreateRoute(ctx, r); err != nil {
			return fmt.Errorf("seed route %d: %w", i, err)
		}
	}
	return nil
}
