package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

// fakeVLLM is a vLLM box as the fleet controller sees it: /health (503
// while "loading"), /v1/models (which answers before the engine is ready,
// as vLLM's does) and chat completions behind the host's API key.
type fakeVLLM struct {
	srv     *httptest.Server
	healthy atomic.Bool
	key     atomic.Value // string
	chats   atomic.Int64
	model   string
	// health counts GET /health by whether it carried a key: the
	// controller's probes do not, the readiness cache's do.
	health, healthKeyed atomic.Int64
}

func newFakeVLLM(t *testing.T, model string) *fakeVLLM {
	f := &fakeVLLM{model: model}
	f.key.Store("")
	authed := func(r *http.Request) bool {
		k := f.key.Load().(string)
		return k != "" && r.Header.Get("Authorization") == "Bearer "+k
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		f.health.Add(1)
		if r.Header.Get("Authorization") != "" {
			f.healthKeyed.Add(1)
		}
		if !f.healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		if !authed(r) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","max_model_len":32768}]}`, f.model)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		f.chats.Add(1)
		if !authed(r) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`, f.model)
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeVLLM) port(t *testing.T) int {
	u, _ := url.Parse(f.srv.URL)
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type hostJSON struct {
	ID              int64      `json:"id"`
	State           string     `json:"state"`
	APIKey          string     `json:"api_key"`
	Revision        string     `json:"revision"`
	AppliedRevision string     `json:"applied_revision"`
	Skew            bool       `json:"skew"`
	RestartPending  bool       `json:"restart_pending"`
	ApplyRequested  bool       `json:"apply_requested"`
	LastConfigFetch *time.Time `json:"last_config_fetch"`
	Liveness        struct {
		AgeSeconds *int64 `json:"age_seconds"`
		Class      string `json:"class"`
	} `json:"liveness"`
	Discovered *fleetapi.Discovered `json:"discovered"`
}

func decodeJSON[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return v
}

// fleetGet calls a fleet endpoint with a fleet key.
func (r *run) fleet(t *testing.T, method, path, key, body string) (int, string) {
	return r.call(t, method, path, key, body)
}

func (r *run) host(t *testing.T, token string, id int64) hostJSON {
	t.Helper()
	code, body := r.call(t, "GET", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d", id), token, "")
	if code != 200 {
		t.Fatalf("get host: %d %s", code, body)
	}
	return decodeJSON[hostJSON](t, body)
}

// waitState polls until the host reaches state; the controller sweeps
// every 40ms in these tests.
func (r *run) waitState(t *testing.T, token string, id int64, state string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := r.host(t, token, id)
		if h.State == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("host %d stayed %s, want %s", id, h.State, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitListed polls /v1/models until model's presence is want: a
// registration reaches the request path when the snapshot is rebuilt and
// the new provider's first readiness probe has answered.
func (r *run) waitListed(t *testing.T, key, model string, want bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if strings.Contains(r.modelIDs(t, key), ","+model+",") == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s listed=%v after 10s, want %v", model, !want, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *run) modelIDs(t *testing.T, key string) string {
	t.Helper()
	code, body := r.call(t, "GET", "/v1/models", key, "")
	if code != 200 {
		t.Fatalf("/v1/models: %d %s", code, body)
	}
	var m struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	_ = json.Unmarshal([]byte(body), &m)
	var ids []string
	for _, d := range m.Data {
		ids = append(ids, d.ID)
	}
	return "," + strings.Join(ids, ",") + ","
}

func fleetConfig(spec, dir string) server.Config {
	cfg := server.Config{Store: spec, DataDir: dir, AdminToken: secret.New("tok-FLEET-FAKE-0123456789")}
	cfg.Fleet.Controller.Interval = 40 * time.Millisecond
	cfg.Fleet.Controller.FailAfter = 2
	cfg.Metadata.Interval = 50 * time.Millisecond
	return cfg
}

const recipeJSON = `{"vllm":{"model":"Qwen/Qwen3-8B","source":{"kind":"hf"},"vram_gb":16,"disk_gb":18,"args":["--max-model-len","32768","--reasoning-parser","qwen3"%s]}}`

// TestFleetLifecycle is the full lifecycle on both stores: add a
// host, the box fetches its assignment, no traffic while /health is 503,
// registration on the healthy transition, deregistration when it goes
// down, and retire keeping the record.
func TestFleetLifecycle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		spec, dir := storetest.Spec(t, d)
		// The controller sweeps every 40 ms and also when the test ticks it.
		sweeps := make(chan time.Time)
		scfg := fleetConfig(spec, dir)
		scfg.Fleet.Controller.Ticks = sweeps
		r := start(t, scfg)
		defer r.srv.Shutdown()
		const tok = "tok-FLEET-FAKE-0123456789"
		_, body := r.call(t, "POST", "/admin/v1/orgs/default/projects/default/keys", tok, `{"name":"client"}`)
		vkey := decodeJSON[struct{ Secret string }](t, body).Secret
		code, body := r.call(t, "POST", "/admin/v1/orgs/default/fleet-keys", tok, `{"name":"template-2026"}`)
		if code != 201 {
			t.Fatalf("fleet key: %d %s", code, body)
		}
		fkey := decodeJSON[struct{ Secret string }](t, body).Secret
		if !strings.HasPrefix(fkey, "rf-") {
			t.Fatalf("fleet key %q", fkey)
		}

		box := newFakeVLLM(t, "Qwen/Qwen3-8B")
		code, body = r.call(t, "POST", "/admin/v1/orgs/default/hosts", tok, fmt.Sprintf(
			`{"ip":"127.0.0.1","port":%d,"model_name":"qwen3","notes":"rented for the scan","recipe":`+recipeJSON+`}`, box.port(t), ""))
		if code != 201 {
			t.Fatalf("create host: %d %s", code, body)
		}
		h := decodeJSON[hostJSON](t, body)
		if h.State != "pending" || !strings.HasPrefix(h.APIKey, "rh-") || h.Liveness.Class != "never" {
			t.Fatalf("new host: %s", body)
		}
		box.key.Store(h.APIKey)
		// The key is shown once.
		if _, again := r.call(t, "GET", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d", h.ID), tok, ""); strings.Contains(again, h.APIKey) {
			t.Fatal("host api key shown twice")
		}

		// The box fetches from its IP: assignment, key and a stable revision.
		code, body = r.fleet(t, "GET", "/vllm/config", fkey, "")
		if code != 200 {
			t.Fatalf("/vllm/config: %d %s", code, body)
		}
		cfg := decodeJSON[fleetapi.Config](t, body)
		if cfg.IP != "127.0.0.1" || len(cfg.Assignments) != 1 {
			t.Fatalf("config: %s", body)
		}
		a := cfg.Assignments[0]
		if a.HostID != h.ID || a.Port != box.port(t) || a.APIKey != h.APIKey || a.ModelName != "qwen3" ||
			a.Recipe.VLLM.Model != "Qwen/Qwen3-8B" || a.Revision == "" || a.Revision != h.Revision {
			t.Fatalf("assignment: %+v (host revision %s)", a, h.Revision)
		}
		_, body2 := r.fleet(t, "GET", "/vllm/config", fkey, "")
		if decodeJSON[fleetapi.Config](t, body2).Assignments[0].Revision != a.Revision {
			t.Fatal("revision changed between two fetches of one payload")
		}
		if hv := r.host(t, tok, h.ID); hv.LastConfigFetch == nil || hv.Liveness.Class != "green" || hv.Liveness.AgeSeconds == nil {
			t.Fatalf("liveness after fetch: %+v", hv)
		}

		// Booting: /health is 503 (while /v1/models already answers).
		// Several sweeps pass; nothing reaches the box, the route is absent.
		deadline := time.Now().Add(400 * time.Millisecond)
		for time.Now().Before(deadline) {
			if ids := r.modelIDs(t, vkey); strings.Contains(ids, ",qwen3,") {
				t.Fatalf("booting host's route is listed: %s", ids)
			}
			if code, _ := r.call(t, "POST", "/v1/chat/completions", vkey, `{"model":"qwen3","messages":[{"role":"user","content":"hi"}]}`); code == 200 {
				t.Fatal("a request succeeded against a booting host")
			}
			time.Sleep(40 * time.Millisecond)
		}
		if n := box.chats.Load(); n != 0 {
			t.Fatalf("%d requests reached the booting box", n)
		}
		if hv := r.host(t, tok, h.ID); hv.State != "pending" {
			t.Fatalf("booting host state %s", hv.State)
		}
		// The host view says why it is not serving yet.
		_, hostBody := r.call(t, "GET", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d", h.ID), tok, "")
		if !strings.Contains(hostBody, `"consecutive_failures"`) || !strings.Contains(hostBody, "/health: status 503") {
			t.Fatalf("a booting host's view does not show the probe error: %s", hostBody)
		}

		// Serving: registered, listed, requests flow with the host's key.
		box.healthy.Store(true)
		r.waitState(t, tok, h.ID, "serving")
		r.waitListed(t, vkey, "qwen3", true)
		code, body = r.call(t, "POST", "/v1/chat/completions", vkey, `{"model":"qwen3","messages":[{"role":"user","content":"hi"}]}`)
		if code != 200 || !strings.Contains(body, `"model":"qwen3"`) || box.chats.Load() != 1 {
			t.Fatalf("request to serving host: %d %s (box saw %d)", code, body, box.chats.Load())
		}
		if _, body := r.call(t, "GET", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d", h.ID), tok, ""); !strings.Contains(body, fmt.Sprintf(`"provider":"host-%d"`, h.ID)) {
			t.Fatalf("serving host does not name its provider: %s", body)
		}
		code, body = r.call(t, "GET", "/admin/v1/orgs/default/projects/default/routes/qwen3", tok, "")
		if code != 200 || !strings.Contains(body, `"upstream_model":"Qwen/Qwen3-8B"`) {
			t.Fatalf("registered route: %d %s", code, body)
		}

		// Down: deregistered after the threshold; the record stays.
		box.healthy.Store(false)
		r.waitState(t, tok, h.ID, "down")
		r.waitListed(t, vkey, "qwen3", false)
		before := box.chats.Load()
		// Readiness hides the model before the controller's deregistration
		// reaches the snapshot: in between a request gets 503
		// metadata_unavailable, then 404. Neither reaches the box.
		testkit.Eventually(t, "404 for a route whose only host is down", func() bool {
			code, body := r.call(t, "POST", "/v1/chat/completions", vkey, `{"model":"qwen3","messages":[{"role":"user","content":"hi"}]}`)
			switch {
			case code == 404 && strings.Contains(body, "model_not_found"):
				return true
			case code == 503 && strings.Contains(body, "metadata_unavailable"):
				return false
			}
			t.Fatalf("a request for a route whose only host is down: %d %s", code, body)
			return false
		})
		if box.chats.Load() != before {
			t.Fatal("a request reached a down host")
		}

		// Back up, then retire: deregistered and kept, never probed again.
		box.healthy.Store(true)
		r.waitState(t, tok, h.ID, "serving")
		r.waitListed(t, vkey, "qwen3", true)
		code, body = r.call(t, "POST", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d/retire", h.ID), tok, "")
		if code != 200 || decodeJSON[hostJSON](t, body).State != "retired" {
			t.Fatalf("retire: %d %s", code, body)
		}
		// Retire rebuilds the snapshot before it answers.
		if ids := r.modelIDs(t, vkey); strings.Contains(ids, ",qwen3,") {
			t.Fatalf("retired host's route is listed: %s", ids)
		}
		// Several sweeps: a healthy retired host must stay retired. The
		// fourth tick is taken only after three whole sweeps since retire.
		for range 4 {
			tick(t, sweeps)
		}
		if hv := r.host(t, tok, h.ID); hv.State != "retired" {
			t.Fatalf("retired host came back as %s", hv.State)
		}
		code, body = r.call(t, "GET", "/admin/v1/orgs/default/hosts", tok, "")
		if code != 200 || !strings.Contains(body, `"state":"retired"`) {
			t.Fatalf("host list after retire: %d %s", code, body)
		}
		_, body = r.fleet(t, "GET", "/vllm/config", fkey, "")
		if len(decodeJSON[fleetapi.Config](t, body).Assignments) != 0 {
			t.Fatalf("a retired host is still assigned: %s", body)
		}
	})
}

// TestFleetRevisionAndReport: the revision is stable, changes with the
// recipe, and the box's report clears the skew and the apply request.
func TestFleetRevisionAndReport(t *testing.T) {
	r := start(t, fleetConfig("sqlite", t.TempDir()))
	defer r.srv.Shutdown()
	const tok = "tok-FLEET-FAKE-0123456789"
	_, body := r.call(t, "POST", "/admin/v1/orgs/default/fleet-keys", tok, `{"name":"k"}`)
	fkey := decodeJSON[struct{ Secret string }](t, body).Secret
	code, body := r.call(t, "POST", "/admin/v1/orgs/default/hosts", tok, `{"ip":"127.0.0.1","port":1,"model_name":"qwen3","recipe":`+fmt.Sprintf(recipeJSON, "")+`}`)
	if code != 201 {
		t.Fatalf("create host: %d %s", code, body)
	}
	h := decodeJSON[hostJSON](t, body)
	rev1 := h.Revision
	report := func(rev string) {
		t.Helper()
		code, body := r.fleet(t, "POST", "/vllm/report", fkey, fmt.Sprintf(
			`{"applied":[{"host_id":%d,"revision":%q}],"discovered":{"gpu":"1x NVIDIA L4","gpu_count":1,"vram_gb":22.5,"disk_free_gb":300,"vllm_version":"0.11.0"}}`, h.ID, rev))
		if code != 200 || !strings.Contains(body, `"accepted":1`) {
			t.Fatalf("report: %d %s", code, body)
		}
	}
	report(rev1)
	hv := r.host(t, tok, h.ID)
	if hv.AppliedRevision != rev1 || hv.Skew || hv.Discovered == nil || hv.Discovered.VLLMVersion != "0.11.0" {
		t.Fatalf("after first report: %+v", hv)
	}
	// Tuning changes the revision too: the box must restart to apply it.
	code, body = r.call(t, "PATCH", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d", h.ID), tok,
		`{"recipe":`+fmt.Sprintf(recipeJSON, `,"--gpu-memory-utilization","0.85"`)+`}`)
	if code != 200 {
		t.Fatalf("patch: %d %s", code, body)
	}
	hv = r.host(t, tok, h.ID)
	if hv.Revision == rev1 || !hv.Skew || !hv.RestartPending || hv.AppliedRevision != rev1 {
		t.Fatalf("after recipe change: %+v", hv)
	}
	_, body = r.fleet(t, "GET", "/vllm/config", fkey, "")
	a := decodeJSON[fleetapi.Config](t, body).Assignments[0]
	if a.Revision != hv.Revision || a.Apply {
		t.Fatalf("config after change: %+v", a)
	}
	// Operator presses apply: the flag reaches the box, the revision stays.
	code, body = r.call(t, "POST", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d/apply", h.ID), tok, "")
	if code != 200 || !decodeJSON[hostJSON](t, body).ApplyRequested {
		t.Fatalf("apply: %d %s", code, body)
	}
	_, body = r.fleet(t, "GET", "/vllm/config", fkey, "")
	a = decodeJSON[fleetapi.Config](t, body).Assignments[0]
	if !a.Apply || a.Revision != hv.Revision {
		t.Fatalf("config after apply: %+v", a)
	}
	// The box restarts and reports: skew and apply are cleared.
	report(hv.Revision)
	hv = r.host(t, tok, h.ID)
	if hv.Skew || hv.RestartPending || hv.ApplyRequested || hv.AppliedRevision != hv.Revision {
		t.Fatalf("after report of the new revision: %+v", hv)
	}
	// A report for a host at another address is ignored.
	code, body = r.fleet(t, "POST", "/vllm/report", fkey, `{"applied":[{"host_id":9999,"revision":"x"}]}`)
	if code != 200 || !strings.Contains(body, `"accepted":0`) {
		t.Fatalf("foreign report: %d %s", code, body)
	}
}

// TestFleetKeys: a wrong key gets 401 (and is not logged), two keys may be
// active for rotation, a third is refused, a revoked key stops working.
func TestFleetKeys(t *testing.T) {
	r := start(t, fleetConfig("sqlite", t.TempDir()))
	defer r.srv.Shutdown()
	const tok = "tok-FLEET-FAKE-0123456789"
	mint := func() (int64, string) {
		code, body := r.call(t, "POST", "/admin/v1/orgs/default/fleet-keys", tok, `{"name":"k"}`)
		if code != 201 {
			t.Fatalf("mint: %d %s", code, body)
		}
		v := decodeJSON[struct {
			ID     int64
			Secret string
		}](t, body)
		return v.ID, v.Secret
	}
	id1, k1 := mint()
	_, k2 := mint()
	for _, k := range []string{k1, k2} {
		if code, body := r.fleet(t, "GET", "/vllm/config", k, ""); code != 200 || !strings.Contains(body, `"assignments":[]`) {
			t.Fatalf("active key: %d %s", code, body)
		}
	}
	code, body := r.call(t, "POST", "/admin/v1/orgs/default/fleet-keys", tok, `{"name":"third"}`)
	if code != 409 || !strings.Contains(body, `"code":"fleet_key_limit"`) {
		t.Fatalf("third key: %d %s", code, body)
	}
	wrong := k1[:len(k1)-4] + "AAAA"
	for _, k := range []string{wrong, "", "rk-notafleetkey_x", "rf-nosuchlookup_secret"} {
		if code, body := r.fleet(t, "GET", "/vllm/config", k, ""); code != 401 || !strings.Contains(body, `"code":"unauthorized"`) {
			t.Fatalf("key %q: %d %s", k, code, body)
		}
	}
	if code, _ := r.fleet(t, "POST", "/vllm/report", wrong, `{}`); code != 401 {
		t.Fatalf("report with a wrong key: %d", code)
	}
	// Rotate: revoke the old key; the new one keeps working.
	if code, body := r.call(t, "DELETE", fmt.Sprintf("/admin/v1/orgs/default/fleet-keys/%d", id1), tok, ""); code != 204 {
		t.Fatalf("revoke: %d %s", code, body)
	}
	if code, _ := r.fleet(t, "GET", "/vllm/config", k1, ""); code != 401 {
		t.Fatalf("revoked key: %d", code)
	}
	if code, _ := r.fleet(t, "GET", "/vllm/config", k2, ""); code != 200 {
		t.Fatalf("second key after rotation: %d", code)
	}
	if _, k3 := mint(); k3 == "" {
		t.Fatal("no key after revoke")
	}
	_, body = r.call(t, "GET", "/admin/v1/orgs/default/fleet-keys", tok, "")
	logs := r.logs.String()
	for _, s := range []string{k1, k2, wrong, secretPart(k1), secretPart(wrong)} {
		if strings.Contains(body, s) || strings.Contains(logs, s) {
			t.Fatalf("fleet key secret leaked into the list or the logs")
		}
	}
	if !strings.Contains(logs, "fleet key refused") {
		t.Fatal("a refused fleet key was not logged")
	}
}

func secretPart(tok string) string {
	_, s, _ := strings.Cut(tok, "_")
	return s
}

// TestHostValidation: malformed recipes get 400 with the field named, a
// pool contract break gets 409 naming the parameter, tuning may differ, and
// nothing is written on refusal.
func TestHostValidation(t *testing.T) {
	r := start(t, fleetConfig("sqlite", t.TempDir()))
	defer r.srv.Shutdown()
	const tok = "tok-FLEET-FAKE-0123456789"
	post := func(body string) (int, string) {
		return r.call(t, "POST", "/admin/v1/orgs/default/hosts", tok, body)
	}
	if code, body := post(`{"ip":"10.0.0.5","port":8000,"model_name":"qwen3","recipe":` + fmt.Sprintf(recipeJSON, "") + `}`); code != 201 {
		t.Fatalf("first host: %d %s", code, body)
	}
	bad := []struct{ body, field string }{
		{`{"ip":"10.0.0.6","port":8000,"model_name":"qwen3","recipe":{}}`, "recipe.vllm"},
		{`{"ip":"10.0.0.6","port":8000,"model_name":"qwen3","recipe":{"vllm":{"model":"m","source":{"kind":"ftp"},"vram_gb":1,"disk_gb":1}}}`, "recipe.vllm.source.kind"},
		{`{"ip":"10.0.0.6","port":8000,"model_name":"qwen3","recipe":{"vllm":{"model":"m","source":{"kind":"url"},"vram_gb":1,"disk_gb":1}}}`, "recipe.vllm.source.url"},
		{`{"ip":"10.0.0.6","port":8000,"model_name":"qwen3","recipe":{"vllm":{"model":"m","source":{"kind":"hf","path":"/x"},"vram_gb":1,"disk_gb":1}}}`, "recipe.vllm.source.path"},
		{`{"ip":"10.0.0.6","port":8000,"model_name":"qwen3","recipe":{"vllm":{"model":"m","source":{"kind":"hf"},"disk_gb":1}}}`, "recipe.vllm.vram_gb"},
		{`{"ip":"10.0.0.6","port":8000,"model_name":"qwen3","recipe":{"vllm":{"model":"m","source":{"kind":"hf"},"vram_gb":1,"disk_gb":1,"args":["--port","9"]}}}`, "recipe.vllm.args[0]"},
		{`{"ip":"10.0.0.6","port":8000,"model_name":"qwen3","recipe":{"vllm":{"model":"m","source":{"kind":"hf"},"vram_gb":1,"disk_gb":1,"args":["--max-model-len","lots"]}}}`, "recipe.vllm.args"},
		{`{"ip":"not-an-ip","port":8000,"model_name":"qwen3","recipe":` + fmt.Sprintf(recipeJSON, "") + `}`, "ip"},
		{`{"ip":"169.254.169.254","port":8000,"model_name":"qwen3","recipe":` + fmt.Sprintf(recipeJSON, "") + `}`, "ip"},
		{`{"ip":"10.0.0.6","port":70000,"model_name":"qwen3","recipe":` + fmt.Sprintf(recipeJSON, "") + `}`, "port"},
	}
	for _, c := range bad {
		code, body := post(c.body)
		if code != 400 || !strings.Contains(body, `"`+c.field+`"`) {
			t.Errorf("%s: %d %s", c.body, code, body)
		}
	}
	// A different --max-model-len would break the pool contract.
	diff := strings.Replace(fmt.Sprintf(recipeJSON, ""), `"32768"`, `"40960"`, 1)
	code, body := post(`{"ip":"10.0.0.7","port":8000,"model_name":"qwen3","recipe":` + diff + `}`)
	if code != 409 || !strings.Contains(body, `"code":"pool_contract_mismatch"`) || !strings.Contains(body, "--max-model-len") {
		t.Fatalf("contract break: %d %s", code, body)
	}
	diff = strings.Replace(fmt.Sprintf(recipeJSON, ""), `"qwen3"]`, `"deepseek_r1"]`, 1)
	if code, body := post(`{"ip":"10.0.0.7","port":8000,"model_name":"qwen3","recipe":` + diff + `}`); code != 409 || !strings.Contains(body, "--reasoning-parser") {
		t.Fatalf("parser break: %d %s", code, body)
	}
	// Tuning may differ.
	if code, body := post(`{"ip":"10.0.0.7","port":8000,"model_name":"qwen3","recipe":` + fmt.Sprintf(recipeJSON, `,"--gpu-memory-utilization","0.8","--kv-cache-memory","20000000000"`) + `}`); code != 201 {
		t.Fatalf("tuning difference refused: %d %s", code, body)
	}
	// The same address twice is a conflict; identity fields are immutable.
	if code, body := post(`{"ip":"10.0.0.7","port":8000,"model_name":"qwen3","recipe":` + fmt.Sprintf(recipeJSON, "") + `}`); code != 409 {
		t.Fatalf("duplicate address: %d %s", code, body)
	}
	if code, body := r.call(t, "PATCH", "/admin/v1/orgs/default/hosts/1", tok, `{"model_name":"other"}`); code != 400 || !strings.Contains(body, `"code":"immutable_field"`) {
		t.Fatalf("patch model_name: %d %s", code, body)
	}
	// Refusals wrote nothing: two hosts exist.
	_, body = r.call(t, "GET", "/admin/v1/orgs/default/hosts", tok, "")
	if n := strings.Count(body, `"model_name":"qwen3"`); n != 2 {
		t.Fatalf("%d hosts after refusals: %s", n, body)
	}
}

// TestReplicasAgree: two replicas share one PostgreSQL store. An admin
// write on one reaches the other's request path (LISTEN/NOTIFY), and a
// fleet registration made by whichever replica holds the controller lease
// is routed by both.
func TestReplicasAgree(t *testing.T) {
	spec, dir := storetest.Spec(t, "postgres")
	const tok = "tok-FLEET-FAKE-0123456789"
	a := start(t, fleetConfig(spec, dir))
	defer a.srv.Shutdown()
	b := start(t, fleetConfig(spec, t.TempDir()))
	defer b.srv.Shutdown()
	_, body := a.call(t, "POST", "/admin/v1/orgs/default/projects/default/keys", tok, `{"name":"client"}`)
	vkey := decodeJSON[struct{ Secret string }](t, body).Secret
	// The key minted on A authenticates on B once B has rebuilt.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if code, _ := b.call(t, "GET", "/v1/models", vkey, ""); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a virtual key minted on replica A never worked on replica B\nA: %s\nB: %s", a.logs.String(), b.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	box := newFakeVLLM(t, "Qwen/Qwen3-8B")
	box.healthy.Store(true)
	code, body := b.call(t, "POST", "/admin/v1/orgs/default/hosts", tok, fmt.Sprintf(
		`{"ip":"127.0.0.1","port":%d,"model_name":"qwen3","recipe":`+recipeJSON+`}`, box.port(t), ""))
	if code != 201 {
		t.Fatalf("create host: %d %s", code, body)
	}
	box.key.Store(decodeJSON[hostJSON](t, body).APIKey)
	a.waitListed(t, vkey, "qwen3", true)
	b.waitListed(t, vkey, "qwen3", true)
	for _, r := range []*run{a, b} {
		if code, body := r.call(t, "POST", "/v1/chat/completions", vkey, `{"model":"qwen3","messages":[{"role":"user","content":"hi"}]}`); code != 200 {
			t.Fatalf("request on a replica: %d %s", code, body)
		}
	}
	if box.chats.Load() != 2 {
		t.Fatalf("the box saw %d requests, want 2", box.chats.Load())
	}
}

// TestFleetRepairsDeletedRoute: a route deleted by hand while its host
// serves comes back at the next sweep, so "target exists iff serving"
// holds whatever an operator does to the route.
func TestFleetRepairsDeletedRoute(t *testing.T) {
	r := start(t, fleetConfig("sqlite", t.TempDir()))
	defer r.srv.Shutdown()
	const tok = "tok-FLEET-FAKE-0123456789"
	_, body := r.call(t, "POST", "/admin/v1/orgs/default/projects/default/keys", tok, `{"name":"client"}`)
	vkey := decodeJSON[struct{ Secret string }](t, body).Secret
	box := newFakeVLLM(t, "Qwen/Qwen3-8B")
	box.healthy.Store(true)
	code, body := r.call(t, "POST", "/admin/v1/orgs/default/hosts", tok, fmt.Sprintf(
		`{"ip":"127.0.0.1","port":%d,"model_name":"qwen3","recipe":`+recipeJSON+`}`, box.port(t), ""))
	if code != 201 {
		t.Fatalf("create host: %d %s", code, body)
	}
	box.key.Store(decodeJSON[hostJSON](t, body).APIKey)
	r.waitListed(t, vkey, "qwen3", true)
	if code, body := r.call(t, "DELETE", "/admin/v1/orgs/default/projects/default/routes/qwen3", tok, ""); code != 204 && code != 200 {
		t.Fatalf("delete route: %d %s", code, body)
	}
	r.waitListed(t, vkey, "qwen3", true)
	if !strings.Contains(r.logs.String(), "registering it again") {
		t.Fatal("the repair was not logged")
	}
}
