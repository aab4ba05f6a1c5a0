package server_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
)

// TestPostgresSessionsStaySteady serves thousands of requests in bursts
// (boxes polling /vllm/config, admin reads) from a gateway on PostgreSQL,
// with the fleet controller sweeping and holding its lease and the change
// listener running, and checks that the pool opens no more sessions than
// it can hold: before issue 24 every burst opened new ones.
func TestPostgresSessionsStaySteady(t *testing.T) {
	const (
		width  = 8
		bursts = 250 // 2,000 requests
		tok    = "tok-FLEET-FAKE-0123456789"
	)
	spec, dir := storetest.Spec(t, "postgres")
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	app := "rolter_test_" + hex.EncodeToString(b)
	u, err := url.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	r := start(t, fleetConfig(u.String(), dir))
	defer r.srv.Shutdown()

	code, body := r.call(t, "POST", "/admin/v1/orgs/default/fleet-keys", tok, `{"name":"template"}`)
	if code != 201 {
		t.Fatalf("fleet key: %d %s", code, body)
	}
	fkey := decodeJSON[struct{ Secret string }](t, body).Secret
	// Nothing listens on port 1: the controller probes it and fails.
	code, body = r.call(t, "POST", "/admin/v1/orgs/default/hosts", tok, `{"ip":"127.0.0.1","port":1,"model_name":"qwen3","recipe":`+fmt.Sprintf(recipeJSON, "")+`}`)
	if code != 201 {
		t.Fatalf("create host: %d %s", code, body)
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: width}}
	defer client.CloseIdleConnections()
	get := func(path, token string) error {
		req, _ := http.NewRequest(http.MethodGet, "http://"+r.addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET %s: %d", path, resp.StatusCode)
		}
		return nil
	}
	burst := func(during func()) {
		t.Helper()
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs []error
		)
		for i := range width {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				switch i % 4 {
				case 0, 1:
					err = get("/vllm/config", fkey)
				case 2:
					err = get("/admin/v1/orgs/default/hosts", tok)
				case 3:
					err = get("/admin/v1/orgs/default/providers", tok)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		if during != nil {
			during()
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("%d requests failed, the first: %v", len(errs), errs[0])
		}
	}

	base := os.Getenv("ROLTER_TEST_POSTGRES")
	if base == "" {
		base = storetest.DefaultPostgres
	}
	mon, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	mon.SetMaxOpenConns(1)
	seen := map[int]bool{}
	sample := func() {
		rows, err := mon.QueryContext(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
		if err != nil {
			t.Fatalf("pg_stat_activity: %v", err)
		}
		defer rows.Close()
		for rows.Next() {
			var pid int
			if err := rows.Scan(&pid); err != nil {
				t.Fatal(err)
			}
			seen[pid] = true
		}
	}

	for range 3 {
		burst(nil)
	}
	warm := r.sessionsOpened(t)
	for range bursts {
		burst(sample)
	}
	total := r.sessionsOpened(t)
	t.Logf("%d requests in bursts of %d: %d sessions opened during warm-up, %d after; PostgreSQL saw %d distinct sessions",
		width*bursts, width, warm, total-warm, len(seen))
	if len(seen) == 0 {
		t.Fatalf("no session with application_name %s in pg_stat_activity", app)
	}
	// Without discards the pool never opens more sessions than it holds.
	if total > sqlstore.DefaultPoolMaxConns {
		t.Errorf("the gateway opened %d sessions; want at most the pool size %d", total, sqlstore.DefaultPoolMaxConns)
	}
	if len(seen) > sqlstore.DefaultPoolMaxConns {
		t.Errorf("PostgreSQL saw %d distinct sessions; want at most the pool size %d", len(seen), sqlstore.DefaultPoolMaxConns)
	}
}

// sessionsOpened reads rolter_store_sessions_opened_total from /metrics.
func (r *run) sessionsOpened(t *testing.T) int {
	t.Helper()
	code, body := r.call(t, "GET", "/metrics", "", "")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, "rolter_store_sessions_opened_total "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			return int(n)
		}
	}
	t.Fatalf("/metrics has no rolter_store_sessions_opened_total:\n%s", body)
	return 0
}
