package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/store/sqlstore"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

type lockedBuffer = testkit.Buffer

// listedModels is what a running gateway routes for key, from its
// snapshot: nil when it refuses the key.
func listedModels(t *testing.T, addr, key string) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	var m struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("/v1/models: %v: %s", err, body)
	}
	ids := []string{}
	for _, d := range m.Data {
		ids = append(ids, d.ID)
	}
	return ids
}

// waitUntil polls cond with a deadline generous for a loaded machine.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// An import into a PostgreSQL store shared with running replicas reaches
// them without any write of their own: rolter import announces its writes
// as a replica does (it used to write silently, and the replicas kept
// serving what they had until something else changed).
func TestImportReachesRunningReplicas(t *testing.T) {
	cmdEnv(t)
	spec, dir := storetest.Spec(t, "postgres")
	out := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := server.Config{Listen: "127.0.0.1:0", Store: spec, DataDir: dir, Out: out, ShutdownTimeout: 5 * time.Second}
	cfg.Fleet.DisableController = true
	srv, err := server.Start(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	k := regexp.MustCompile(`virtual key:\s+(rk-\S+)`).FindStringSubmatch(out.String())
	if k == nil {
		t.Fatalf("first start banner: %q", out.String())
	}

	// The replica listens for announcements once it has started; a key
	// written and announced from outside proves the listener is up, so
	// what follows cannot reach it through the rebuild that LISTEN makes
	// when it is (re-)established.
	other, err := sqlstore.Open(context.Background(), spec, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	svc := admin.NewService(other, nil, log)
	svc.SetPublisher(func(ctx context.Context) {
		if err := other.NotifyChange(ctx); err != nil {
			t.Errorf("notify: %v", err)
		}
	})
	probe, err := svc.CreateVirtualKey(context.Background(), "default", "default", admin.VirtualKeyInput{Name: "probe"})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the replica never accepted a key announced from outside", func() bool {
		return listedModels(t, srv.Addr, probe.Secret) != nil
	})
	if got := listedModels(t, srv.Addr, k[1]); strings.Contains(strings.Join(got, ","), "imported-model") {
		t.Fatalf("listed before the import: %v", got)
	}

	file := writeFile(t, t.TempDir(), "litellm.yaml", `model_list:
  - model_name: imported-model
    litellm_params:
      model: openai/gpt-4o
      api_key: `+cmdLiteralKey+`
`)
	if code, stdout, stderr := runCmd(t, "import", "--store", spec, "--data-dir", dir, file); code != 0 {
		t.Fatalf("import: exit %d\n%s\n%s", code, stdout, stderr)
	}
	waitUntil(t, "the running replica never routed the imported model", func() bool {
		for _, id := range listedModels(t, srv.Addr, k[1]) {
			if id == "imported-model" {
				return true
			}
		}
		return false
	})
}
