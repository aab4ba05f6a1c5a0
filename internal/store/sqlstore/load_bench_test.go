package sqlstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/sqlstore"
)

// BenchmarkLoadAt reads the whole catalog of a SQLite store seeded as
// internal/bench's seed does (one target per route, over 256 providers),
// as `rolter serve` does at start-up (issue 21). cpu-ns/op is the
// process's user and system CPU, less inflated than ns/op on a busy machine.
//
//	go test ./internal/store/sqlstore -run '^$' -bench LoadAt -benchmem
func BenchmarkLoadAt(b *testing.B) {
	ctx := context.Background()
	db, err := sqlstore.Open(ctx, "sqlite", b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const routes = 100_000
	seedRoutes(b, db, routes, 256)
	cpu := processCPU()
	b.ResetTimer()
	for range b.N {
		st, _, err := db.LoadAt(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if len(st.Routes) != routes {
			b.Fatalf("loaded %d routes, want %d", len(st.Routes), routes)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// seedRoutes writes n routes of one target each, spread over providers,
// in one transaction (the store's own writes take one each).
func seedRoutes(b *testing.B, db *sqlstore.DB, n, providers int) {
	b.Helper()
	ctx := context.Background()
	org := &store.Org{Name: "bench"}
	if err := db.CreateOrg(ctx, org); err != nil {
		b.Fatal(err)
	}
	proj := &store.Project{OrgID: org.ID, Name: "bench"}
	if err := db.CreateProject(ctx, proj); err != nil {
		b.Fatal(err)
	}
	ids := make([]int64, providers)
	for i := range ids {
		p := &store.Provider{OrgID: org.ID, Slug: fmt.Sprintf("filler-%05d", i), Name: fmt.Sprintf("filler %d", i),
			Kind: store.KindVLLM, BaseURL: "http://127.0.0.1:1", MetadataSource: store.MetadataConfigured,
			Keys: []store.ProviderKey{{Secret: secret.New(fmt.Sprintf("sk-filler-%05d", i)), Weight: 1}}}
		if err := db.CreateProvider(ctx, p); err != nil {
			b.Fatal(err)
		}
		ids[i] = p.ID
	}
	tx, err := db.SQL().BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // committed below
	t := time.Now().UTC().Truncate(time.Microsecond)
	for i := range n {
		var id int64
		if err := tx.QueryRowContext(ctx, `INSERT INTO routes (project_id, model, strategy, policy, rpm_limit, tpm_limit, fallbacks, context_fallback, created_at, updated_at)
			VALUES (?, ?, 'weighted', '{}', 0, 0, '[]', '', ?, ?) RETURNING id`, proj.ID, fmt.Sprintf("filler-model-%06d", i), t, t).Scan(&id); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO route_targets (route_id, provider_id, upstream_model, weight, priority, position, context_limit)
			VALUES (?, ?, 'm', 1, 0, 0, 0)`, id, ids[i%providers]); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}
