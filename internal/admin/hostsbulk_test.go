package admin_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

func bulkRecipe(args ...string) fleetapi.Recipe {
	return fleetapi.Recipe{VLLM: &fleetapi.VLLM{Model: "Qwen/Qwen3-8B", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 16, DiskGB: 18, Args: args}}
}

// bulkHosts is n hosts of the pool qwen3 at 10.1.x.y:8000.
func bulkHosts(n int) []admin.HostInput {
	hs := make([]admin.HostInput, n)
	for i := range hs {
		hs[i] = admin.HostInput{IP: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), Port: 8000, ModelName: "qwen3", Recipe: bulkRecipe("--max-model-len", "32768")}
	}
	return hs
}

type bulkEnv struct {
	db   store.Store
	svc  *admin.Service
	org  int64
	logs *bytes.Buffer
}

func newBulkEnv(t testing.TB, dialect string) *bulkEnv {
	t.Helper()
	ctx := context.Background()
	db := storetest.Open(t, dialect, nil)
	logs := &bytes.Buffer{}
	svc := admin.NewService(db, nil, slog.New(slog.NewTextHandler(logs, nil)))
	if _, err := svc.CreateOrg(ctx, admin.OrgInput{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"default", "other"} {
		if _, err := svc.CreateProject(ctx, "acme", admin.ProjectInput{Name: p}); err != nil && !admin.AlreadyExists(err) {
			t.Fatal(err)
		}
	}
	o, err := db.GetOrg(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	return &bulkEnv{db: db, svc: svc, org: o.ID, logs: logs}
}

func (e *bulkEnv) hosts(t *testing.T) int {
	t.Helper()
	hs, err := e.db.ListHosts(context.Background(), e.org, store.Page{Limit: 5000})
	if err != nil {
		t.Fatal(err)
	}
	return len(hs)
}

// A list of hosts is created in one call, each with its own API key, in
// the order given.
func TestCreateHostsCreatesTheBatch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		e := newBulkEnv(t, d)
		in := bulkHosts(5)
		in[3].Project = "other"
		res, err := e.svc.CreateHosts(context.Background(), "acme", admin.HostsInput{Hosts: in})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Hosts) != 5 {
			t.Fatalf("%d views", len(res.Hosts))
		}
		keys := map[string]bool{}
		for i, v := range res.Hosts {
			if v.IP != in[i].IP || v.State != store.HostPending || !strings.HasPrefix(v.APIKey, "rh-") || keys[v.APIKey] {
				t.Fatalf("view %d: %+v", i, v)
			}
			keys[v.APIKey] = true
			if i > 0 && v.ID <= res.Hosts[i-1].ID {
				t.Fatalf("ids out of order: %d after %d", v.ID, res.Hosts[i-1].ID)
			}
		}
		if res.Hosts[3].Project != "other" || res.Hosts[0].Project != "default" {
			t.Fatalf("projects: %q %q", res.Hosts[3].Project, res.Hosts[0].Project)
		}
		if n := e.hosts(t); n != 5 {
			t.Fatalf("%d hosts stored", n)
		}
		// One log line for the batch, not one per host.
		if got := strings.Count(e.logs.String(), "fleet hosts added"); got != 1 || strings.Contains(e.logs.String(), "fleet host added") {
			t.Fatalf("logs:\n%s", e.logs)
		}
	})
}

// One bad entry refuses the batch with an error naming its index and
// field, and nothing is written.
func TestCreateHostsAllOrNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		e := newBulkEnv(t, d)
		if _, err := e.svc.CreateHost(ctx, "acme", admin.HostInput{IP: "10.9.0.1", Port: 8000, ModelName: "qwen3", Recipe: bulkRecipe("--max-model-len", "32768")}); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name  string
			edit  func(hs []admin.HostInput)
			code  string
			field string
		}{
			{"bad port", func(hs []admin.HostInput) { hs[3].Port = 0 }, admin.CodeValidation, "hosts[3].port"},
			{"bad recipe", func(hs []admin.HostInput) { hs[4].Recipe.VLLM = nil }, admin.CodeValidation, "hosts[4].recipe.vllm"},
			{"address twice in the batch", func(hs []admin.HostInput) { hs[5].IP = hs[1].IP }, admin.CodeValidation, "hosts[5].ip"},
			{"address already held", func(hs []admin.HostInput) { hs[2].IP = "10.9.0.1" }, admin.CodeConflict, ""},
			{"unknown project", func(hs []admin.HostInput) { hs[1].Project = "nope" }, admin.CodeNotFound, ""},
			{"pool contract against the pool", func(hs []admin.HostInput) { hs[6].Recipe = bulkRecipe("--max-model-len", "8192") },
				admin.CodePoolContract, "hosts[6].recipe.vllm"},
		}
		for _, c := range cases {
			in := bulkHosts(8)
			c.edit(in)
			_, err := e.svc.CreateHosts(ctx, "acme", admin.HostsInput{Hosts: in})
			ae := admin.AsError(err)
			if ae == nil || ae.Code != c.code {
				t.Fatalf("%s: %v", c.name, err)
			}
			if c.field != "" && ae.Fields[c.field] == "" {
				t.Fatalf("%s: fields %v", c.name, ae.Fields)
			}
			idx := c.field[:strings.IndexByte(c.field+".", '.')]
			if c.field == "" {
				idx = map[string]string{admin.CodeConflict: "hosts[2]", admin.CodeNotFound: "hosts[1]"}[c.code]
			}
			if !strings.HasPrefix(ae.Message, idx+": ") {
				t.Fatalf("%s: message %q does not name %s", c.name, ae.Message, idx)
			}
			if n := e.hosts(t); n != 1 {
				t.Fatalf("%s: %d hosts after a refused batch", c.name, n)
			}
		}
	})
}

// The pool contract holds among the batch's own hosts too: a new pool
// whose entries disagree is refused at the first entry that differs,
// naming the entry it differs from; hosts of another pool may differ.
func TestCreateHostsPoolContractWithinTheBatch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		e := newBulkEnv(t, d)
		in := bulkHosts(4)
		in[1].ModelName, in[1].Recipe = "llama", bulkRecipe("--max-model-len", "4096") // another pool
		in[3].Recipe = bulkRecipe("--max-model-len", "8192")
		_, err := e.svc.CreateHosts(ctx, "acme", admin.HostsInput{Hosts: in})
		ae := admin.AsError(err)
		if ae == nil || ae.Code != admin.CodePoolContract || !strings.Contains(ae.Fields["hosts[3].recipe.vllm"], "hosts[0]") {
			t.Fatalf("disagreeing batch: %+v", ae)
		}
		in[3].Recipe = in[0].Recipe
		if _, err := e.svc.CreateHosts(ctx, "acme", admin.HostsInput{Hosts: in}); err != nil {
			t.Fatal(err)
		}
		if n := e.hosts(t); n != 4 {
			t.Fatalf("%d hosts", n)
		}
	})
}

// A batch holds at most MaxHostsPerCreate hosts, and at least one.
func TestCreateHostsCap(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		e := newBulkEnv(t, d)
		_, err := e.svc.CreateHosts(ctx, "acme", admin.HostsInput{Hosts: bulkHosts(admin.MaxHostsPerCreate + 1)})
		if ae := admin.AsError(err); ae == nil || ae.Code != admin.CodeTooManyEntries || ae.Kind != admin.ErrInvalid {
			t.Fatalf("over the cap: %v", err)
		}
		if _, err := e.svc.CreateHosts(ctx, "acme", admin.HostsInput{}); admin.AsError(err).Fields["hosts"] == "" {
			t.Fatalf("empty batch: %v", err)
		}
		if n := e.hosts(t); n != 0 {
			t.Fatalf("%d hosts after refused batches", n)
		}
		res, err := e.svc.CreateHosts(ctx, "acme", admin.HostsInput{Hosts: bulkHosts(admin.MaxHostsPerCreate)})
		if err != nil || len(res.Hosts) != admin.MaxHostsPerCreate {
			t.Fatalf("at the cap: %d hosts, %v", len(res.Hosts), err)
		}
	})
}

// Apply creates an org's new hosts in one batch: one log line for them,
// the changes in the entries' order, and a bad new entry named by its
// path in the desired state.
func TestApplyCreatesHostsInOneBatch(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		e := newBulkEnv(t, d)
		in := bulkHosts(4)
		if _, err := e.svc.CreateHost(ctx, "acme", in[1]); err != nil {
			t.Fatal(err)
		}
		in[1].Notes = "rack 4" // an update between creates
		desired := func(hs []admin.HostInput) admin.Desired {
			return admin.Desired{Orgs: []admin.DesiredOrg{{OrgInput: admin.OrgInput{Name: "acme"}, Hosts: hs}}}
		}
		e.logs.Reset()
		res, err := e.svc.Apply(ctx, desired(in), admin.ApplyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range res.Changes {
			if c.Kind == admin.KindHost {
				got = append(got, c.Entry+" "+c.Action)
				if (c.Action == admin.ActionCreate) != (c.Secret != "") {
					t.Fatalf("change %+v", c)
				}
			}
		}
		want := "[orgs[0].hosts[0] create orgs[0].hosts[1] update orgs[0].hosts[2] create orgs[0].hosts[3] create]"
		if fmt.Sprint(got) != want {
			t.Fatalf("changes %v, want %s", got, want)
		}
		if !strings.Contains(e.logs.String(), "fleet hosts added") || !strings.Contains(e.logs.String(), "hosts=3") ||
			strings.Contains(e.logs.String(), "fleet host added") {
			t.Fatalf("logs:\n%s", e.logs)
		}
		if n := e.hosts(t); n != 4 {
			t.Fatalf("%d hosts", n)
		}

		more := append(in, bulkHosts(7)[4:]...)
		more[5].Recipe = bulkRecipe("--max-model-len", "8192")
		_, err = e.svc.Apply(ctx, desired(more), admin.ApplyOptions{})
		if ae := admin.AsError(err); ae == nil || ae.Code != admin.CodePoolContract || ae.Fields["orgs[0].hosts[5].recipe.vllm"] == "" {
			t.Fatalf("apply with a bad new host: %+v", ae)
		}
		if n := e.hosts(t); n != 4 {
			t.Fatalf("%d hosts after a refused apply", n)
		}
	})
}

// forceDeadlock runs write, which must lock the acme org and then the
// default project's row (a host batch does), into a PostgreSQL deadlock:
// a transaction of the test's holds the project row write waits for, then
// asks for the org row write holds. The test's session waits longer
// before looking for deadlocks, so write's is the one aborted; its error
// is returned.
func (e *bulkEnv) forceDeadlock(t *testing.T, write func(ctx context.Context) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := e.db.(interface{ SQL() *sql.DB }).SQL()
	var project int64
	if err := db.QueryRowContext(ctx, `SELECT id FROM projects WHERE org_id = $1 AND name = 'default'`, e.org).Scan(&project); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // after the Rollback below: sql.ErrTxDone
	var xid string
	if _, err := tx.ExecContext(ctx, `SET LOCAL deadlock_timeout = '30s'`); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT id FROM projects WHERE id = $1 FOR UPDATE`, project).Scan(&project); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT txid_current()::text`).Scan(&xid); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- write(ctx) }()
	// write holds the org and waits on the project row.
	waiting := func() bool {
		var n int
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted AND transactionid::text = $1`, xid).Scan(&n)
		return err == nil && n > 0
	}
	for !waiting() {
		select {
		case err := <-done:
			t.Fatalf("the write ended before waiting on the project: %v", err)
		case <-ctx.Done():
			t.Fatal("the write never waited on the project row")
		case <-time.After(10 * time.Millisecond):
		}
	}
	var org int64
	if err := tx.QueryRowContext(ctx, `SELECT id FROM orgs WHERE id = $1 FOR UPDATE`, e.org).Scan(&org); err != nil {
		t.Fatalf("the test's transaction was aborted instead of the write's: %v", err)
	}
	err = <-done
	if rerr := tx.Rollback(); rerr != nil {
		t.Fatal(rerr)
	}
	return err
}

// A batch that PostgreSQL aborts as a deadlock is a 409 write_conflict
// for the whole batch (retry), not an internal error nor an entry's, and
// writes nothing. In an apply, that failure is blamed on the org's hosts
// list, not on the first new host.
func TestCreateHostsDeadlockIsAWriteConflict(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		if d != "postgres" {
			t.Skip("SQLite serialises transactions: no deadlock")
		}
		e := newBulkEnv(t, d)
		err := e.forceDeadlock(t, func(ctx context.Context) error {
			_, err := e.svc.CreateHosts(ctx, "acme", admin.HostsInput{Hosts: bulkHosts(3)})
			return err
		})
		ae := admin.AsError(err)
		if ae == nil || ae.Code != admin.CodeWriteConflict || ae.Kind != admin.ErrConflict || strings.HasPrefix(ae.Message, "hosts[") {
			t.Fatalf("deadlocked batch: %v", err)
		}
		if n := e.hosts(t); n != 0 {
			t.Fatalf("%d hosts after a deadlocked batch", n)
		}

		desired := admin.Desired{Orgs: []admin.DesiredOrg{{OrgInput: admin.OrgInput{Name: "acme"}, Hosts: bulkHosts(3)}}}
		err = e.forceDeadlock(t, func(ctx context.Context) error {
			_, err := e.svc.Apply(ctx, desired, admin.ApplyOptions{})
			return err
		})
		ae = admin.AsError(err)
		if ae == nil || ae.Code != admin.CodeWriteConflict || !strings.HasPrefix(ae.Message, `orgs[0].hosts (org "acme"): `) {
			t.Fatalf("deadlocked apply: %v", err)
		}
		if n := e.hosts(t); n != 0 {
			t.Fatalf("%d hosts after a deadlocked apply", n)
		}
	})
}

// In an apply, an error that names another new host names it by its
// place in the desired state, not in the batch of new hosts: hosts[0]
// exists, so hosts[1] and hosts[2] are the batch's first and second.
func TestApplyNamesTheConflictingEntryByItsPlace(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		ctx := context.Background()
		e := newBulkEnv(t, d)
		in := bulkHosts(3)
		if _, err := e.svc.CreateHost(ctx, "acme", in[0]); err != nil {
			t.Fatal(err)
		}
		in[1].ModelName, in[1].Recipe = "llama", bulkRecipe("--max-model-len", "4096")
		in[2].ModelName, in[2].Recipe = "llama", bulkRecipe("--max-model-len", "8192")
		desired := func(hs []admin.HostInput) admin.Desired {
			return admin.Desired{Orgs: []admin.DesiredOrg{{OrgInput: admin.OrgInput{Name: "acme"}, Hosts: hs}}}
		}
		_, err := e.svc.Apply(ctx, desired(in), admin.ApplyOptions{})
		ae := admin.AsError(err)
		if ae == nil || ae.Code != admin.CodePoolContract || !strings.HasPrefix(ae.Message, "orgs[0].hosts[2] ") ||
			!strings.Contains(ae.Message, "differs from orgs[0].hosts[1] serving") ||
			!strings.Contains(ae.Fields["orgs[0].hosts[2].recipe.vllm"], "orgs[0].hosts[1]") {
			t.Fatalf("pool contract among new hosts: %+v", ae)
		}

		// An address twice among the new hosts names the first by its
		// place too (the desired state's own check finds it first).
		in[2].Recipe = in[1].Recipe
		in[2].IP = in[1].IP
		_, err = e.svc.Apply(ctx, desired(in), admin.ApplyOptions{})
		ae = admin.AsError(err)
		if ae == nil || ae.Code != admin.CodeValidation || !strings.Contains(ae.Fields["orgs[0].hosts[2].ip"], "orgs[0].hosts[1]") {
			t.Fatalf("an address twice among new hosts: %+v", ae.Fields)
		}
		if n := e.hosts(t); n != 1 {
			t.Fatalf("%d hosts after refused applies", n)
		}
	})
}

// BenchmarkCreateHosts creates MaxHostsPerCreate hosts in one batch per
// iteration, each on fresh addresses in the same pool: the pool the
// contract check reads grows by MaxHostsPerCreate hosts per iteration
// (from empty), so later iterations cost more than the first.
func BenchmarkCreateHosts(b *testing.B) {
	for _, d := range []string{"sqlite", "postgres"} {
		b.Run(d, func(b *testing.B) {
			e := newBulkEnv(b, d)
			ctx := context.Background()
			n := admin.MaxHostsPerCreate
			for i := 0; b.Loop(); i++ {
				hs := bulkHosts(n)
				for j := range hs {
					hs[j].IP = fmt.Sprintf("10.%d.%d.%d", 2+i, j/250, j%250+1)
				}
				if _, err := e.svc.CreateHosts(ctx, "acme", admin.HostsInput{Hosts: hs}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
