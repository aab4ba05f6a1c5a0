package bench

import (
	"context"
	"fmt"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
)

// --pool-size gives the chat scenarios' route "bench" that many targets
// (issue 24: a request's CPU must not grow with its route's pool). Each
// target is its own provider, "bench-pool-NNNNN", every one pointing at
// the mock, so the load and the answers are the same at any size and only
// the pool the gateway balances over changes.

// MaxPoolSize caps --pool-size: a fleet's largest pools, well past the
// admin API's cap on a route's targets (the bench writes the route to the
// store directly, as fleet pools grow without that cap).
const MaxPoolSize = 10000

// poolSlug is the slug of the pool's i-th provider.
func poolSlug(i int) string { return fmt.Sprintf("bench-pool-%05d", i) }

// checkPoolSize validates --pool-size.
func checkPoolSize(n int) error {
	if n < 1 || n > MaxPoolSize {
		return fmt.Errorf("--pool-size is %d; want 1 to %d", n, MaxPoolSize)
	}
	return nil
}

// seedPool writes n providers at mockBase and the route "bench" over all
// of them into the store in dataDir, which seed has created, before
// `rolter serve` opens it. The bench then creates only its key through the
// admin API.
func seedPool(ctx context.Context, dataDir, mockBase string, n int) error {
	db, err := sqlstore.Open(ctx, "sqlite", dataDir, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.SQL().ExecContext(ctx, "PRAGMA synchronous=OFF"); err != nil { // a throwaway store (seed.go)
		return err
	}
	org, err := db.GetOrg(ctx, orgName)
	if err != nil {
		return err
	}
	proj, err := db.GetProject(ctx, org.ID, projectName)
	if err != nil {
		return err
	}
	targets := make([]store.Target, n)
	for i := range targets {
		p := &store.Provider{OrgID: org.ID, Slug: poolSlug(i), Name: fmt.Sprintf("bench pool %d", i),
			Kind: store.KindVLLM, BaseURL: mockBase, MetadataSource: store.MetadataConfigured,
			// The mock is shaped by x-demo-* headers, as for bench-mock.
			Settings: store.ProviderSettings{ForwardHeaders: []string{"X-Demo-*"}},
			Keys:     []store.ProviderKey{{Secret: secret.New(fmt.Sprintf("sk-pool-%05d", i)), Weight: 1}}}
		if err := db.CreateProvider(ctx, p); err != nil {
			return fmt.Errorf("seed pool provider %d: %w", i, err)
		}
		targets[i] = store.Target{ProviderID: p.ID, UpstreamModel: upstreamName, Weight: 1}
	}
	return db.CreateRoute(ctx, &store.Route{ProjectID: proj.ID, Model: benchRoute, Strategy: "weighted", Targets: targets})
}
