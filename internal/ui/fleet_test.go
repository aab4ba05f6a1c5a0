package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/fleet"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/testkit"
)

// box is a GPU box's agent as the gateway sees it: it fetches its
// assignments from the real fleet endpoints, over the harness's store,
// from 127.0.0.1, and reports what it runs.
type box struct {
	t   *testing.T
	srv *httptest.Server
	key string
}

func newBox(t *testing.T, h *harness) *box {
	t.Helper()
	k, err := h.svc.CreateFleetKey(context.Background(), "default", admin.FleetKeyInput{Name: "test box"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(fleetEndpoints(h))
	t.Cleanup(srv.Close)
	return &box{t: t, srv: srv, key: k.Secret}
}

// fleetEndpoints are the fleet endpoints wired as the server wires them:
// they answer from memory, so admin writes and snapshot swaps tell them.
func fleetEndpoints(h *harness) *fleet.Handler {
	fh := fleet.NewHandler(h.db, fleet.HandlerConfig{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	h.svc.SetFleetChanged(fh.Invalidate)
	h.snap.OnSwap(func(*snapshot.Snapshot) { fh.Invalidate() })
	return fh
}

func (b *box) call(method, path string, body []byte) []byte {
	b.t.Helper()
	req, _ := http.NewRequest(method, b.srv.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+b.key)
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		b.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
	}
	return out
}

// fetch gets the box's assignments, as the agent does every interval.
func (b *box) fetch() fleetapi.Config {
	b.t.Helper()
	var c fleetapi.Config
	if err := json.Unmarshal(b.call(http.MethodGet, fleetapi.ConfigPath, nil), &c); err != nil {
		b.t.Fatal(err)
	}
	return c
}

// runs reports that the box runs revision rev for host id.
func (b *box) runs(id int64, rev string) {
	b.t.Helper()
	body, _ := json.Marshal(fleetapi.Report{Applied: []fleetapi.Applied{{HostID: id, Revision: rev}},
		Discovered: fleetapi.Discovered{GPU: "1x NVIDIA L4", GPUCount: 1, VRAMGB: 22.5, DiskFreeGB: 310, VLLMVersion: "0.11.0"}})
	b.call(http.MethodPost, fleetapi.ReportPath, body)
}

// startAll fetches and reports every assignment applied: the box runs
// what it was told.
func (b *box) startAll() fleetapi.Config {
	b.t.Helper()
	c := b.fetch()
	for _, a := range c.Assignments {
		b.runs(a.HostID, a.Revision)
	}
	return c
}

var hostKeyRe = regexp.MustCompile(`rh-[A-Za-z0-9_-]{20,}`)

func testRecipe(maxLen string, extra ...string) fleetapi.Recipe {
	return fleetapi.Recipe{VLLM: &fleetapi.VLLM{Model: "Qwen/Qwen3-8B-FP8", Source: fleetapi.Source{Kind: "hf"}, VRAMGB: 12, DiskGB: 18,
		Args: append([]string{"--max-model-len", maxLen}, extra...)}}
}

func addHost(t *testing.T, h *harness, ip string, port int, model string, rc fleetapi.Recipe) admin.HostView {
	t.Helper()
	v, err := h.svc.CreateHost(context.Background(), "default", admin.HostInput{IP: ip, Port: port, ModelName: model, Recipe: rc,
		Notes: "rented for the scan"})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func getHost(t *testing.T, h *harness, id int64) admin.HostView {
	t.Helper()
	v, err := h.svc.GetHost(context.Background(), "default", strconv.FormatInt(id, 10))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// hostFields is the edit form of host v as the page fills it, changed by
// kv.
func hostFields(v admin.HostView, kv ...string) url.Values {
	f := hostFormOf(v)
	form := url.Values{"org": {"default"}, "port": {f.Port}, "recipe.vllm.model": {f.Model}, "recipe.vllm.source.kind": {f.Kind},
		"recipe.vllm.source.repo": {f.Repo}, "recipe.vllm.vram_gb": {f.VRAM}, "recipe.vllm.disk_gb": {f.Disk},
		"recipe.vllm.args": {f.Args}, "notes": {f.Notes}}
	for i := 0; i+1 < len(kv); i += 2 {
		form.Set(kv[i], kv[i+1])
	}
	return form
}

// TestFleetBoardShowsRevisionsSkewAndLiveness: the board shows "applied A
// / current C", the skew badge and what a restart would change, and each
// box's last fetch as an age coloured by design 002's thresholds with the
// exact time on hover.
func TestFleetBoardShowsRevisionsSkewAndLiveness(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	bx := newBox(t, h)
	served := addHost(t, h, "127.0.0.1", 8000, "qwen3", testRecipe("32768"))
	stale := addHost(t, h, "10.0.0.6", 8000, "llama3", testRecipe("32768"))
	lost := addHost(t, h, "10.0.0.7", 8000, "llama3", testRecipe("32768"))
	never := addHost(t, h, "10.0.0.8", 8000, "llama3", testRecipe("32768"))
	bx.startAll()
	r1 := getHost(t, h, served.ID).Revision
	now := time.Now()
	if err := h.db.TouchHosts(ctx, []int64{stale.ID}, now.Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := h.db.TouchHosts(ctx, []int64{lost.ID}, now.Add(-8*24*time.Hour)); err != nil {
		t.Fatal(err)
	}

	b := h.browser()
	b.login(h.token)
	// Editing the recipe through the page makes a new revision: skew.
	r := b.postCSRF("/ui/fleet/"+itoa64(served.ID), hostFields(getHost(t, h, served.ID), "recipe.vllm.args", "--max-model-len\n40960"))
	if r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "done=new-revision") {
		t.Fatalf("edit recipe: %d %q %s", r.status, r.header.Get("Location"), r.body)
	}
	after := getHost(t, h, served.ID)
	if !after.Skew || after.AppliedRevision != r1 || after.Revision == r1 {
		t.Fatalf("after the edit: %+v", after)
	}
	r2 := after.Revision

	page := b.get("/ui/fleet")
	mustContain(t, "board", page.body,
		`Fleet <span class="count">(4)</span>`,
		`applied <code title="`+r1+`">`+r1[:8]+`…</code> / current <code title="`+r2+`">`+r2[:8]+`…</code>`,
		`<span class="status st-warn" title="the box runs an older revision: a restart is pending">skew</span>`,
		`id="host-`+itoa64(served.ID)+`-changes"`,
		`<code>recipe.vllm.args</code>: <code class="was">--max-model-len 32768</code> → <code>--max-model-len 40960</code>`,
		"Restart host "+itoa64(served.ID)+" onto revision "+r2[:8]+"…?",
		"rented for the scan",
		`<span class="status st-warn">pending</span>`)
	// Liveness: green under an hour, amber to a week, red beyond, grey
	// before the first fetch, each with the exact time on hover.
	for _, c := range []struct {
		id    int64
		class string
		text  string
	}{{served.ID, "st-ok", "just now"}, {stale.ID, "st-warn", "2 h ago"}, {lost.ID, "st-bad", "8 days ago"}, {never.ID, "st-off", "never fetched"}} {
		row := hostRowOf(t, page.body, c.id)
		mustContain(t, "liveness of host "+itoa64(c.id), row, `<span class="status `+c.class+`" title="`)
		mustContain(t, "liveness of host "+itoa64(c.id), row, `">`+c.text+`</span>`)
	}
	mustContain(t, "exact time", hostRowOf(t, page.body, stale.ID), `title="last config fetch `+now.Add(-2*time.Hour).UTC().Format("2006-01-02 15:04")+":")
	mustContain(t, "never", hostRowOf(t, page.body, never.ID), `title="the box has not fetched its config yet"`)
	// Hosts in sync have no skew and no Apply button.
	mustNotContain(t, "in-sync host", hostRowOf(t, page.body, stale.ID), ">skew<", "apply-"+itoa64(stale.ID))

	// Filters: search and state, kept in the sort links.
	page = b.get("/ui/fleet?q=10.0.0.7")
	mustContain(t, "search", page.body, "1 of 4 hosts shown", `id="host-`+itoa64(lost.ID)+`"`)
	page = b.get("/ui/fleet?state=serving")
	mustContain(t, "state filter", page.body, "No host matches.")
	page = b.get("/ui/fleet?sort=liveness")
	if i, j := strings.Index(page.body, `id="host-`+itoa64(lost.ID)+`"`), strings.Index(page.body, `id="host-`+itoa64(served.ID)+`"`); i < 0 || j < 0 || i > j {
		t.Fatalf("sort by liveness puts the stalest first: %d %d", i, j)
	}

	// The host's page: the same revision line, the changes, the recipe.
	detail := b.get("/ui/fleet/" + itoa64(served.ID))
	mustContain(t, "detail", detail.body, "Host "+itoa64(served.ID), "127.0.0.1:8000", "Qwen/Qwen3-8B-FP8", "1x NVIDIA L4",
		"<code>--max-model-len 40960</code>", "--max-model-len</dt><dd class=\"mono\">40960",
		`<textarea id="vllm-args" name="recipe.vllm.args" rows="6" spellcheck="false">--max-model-len
40960</textarea>`)
}

// hostRowOf cuts host id's rows (the row and its details row) out of the
// board.
func hostRowOf(t *testing.T, body string, id int64) string {
	t.Helper()
	i := strings.Index(body, `<tr id="host-`+itoa64(id)+`"`)
	if i < 0 {
		t.Fatalf("no row for host %d in:\n%s", id, body)
	}
	rest := body[i:]
	if j := strings.Index(rest[1:], `<tr id="host-`); j >= 0 {
		rest = rest[:j+1]
	}
	return rest
}

// TestFleetApplyAndRetire: Apply asks the box to restart (the box sees it
// on its next fetch and, once it reports the new revision, the skew is
// gone); Retire keeps the record; both refuse a retired host, on the page.
func TestFleetApplyAndRetire(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	bx := newBox(t, h)
	v := addHost(t, h, "127.0.0.1", 8000, "qwen3", testRecipe("32768"))
	bx.startAll()
	rc := testRecipe("40960")
	if _, err := h.svc.PatchHost(ctx, "default", itoa64(v.ID), admin.HostPatch{Recipe: &rc}); err != nil {
		t.Fatal(err)
	}
	if c := bx.fetch(); c.Assignments[0].Apply {
		t.Fatal("apply set before anyone pressed it")
	}
	b := h.browser()
	b.login(h.token)
	r := b.postCSRF("/ui/fleet/"+itoa64(v.ID)+"/apply?from=list", url.Values{"org": {"default"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/fleet?done=applied&host="+itoa64(v.ID)+"&org=default" {
		t.Fatalf("apply: %d %q", r.status, r.header.Get("Location"))
	}
	page := b.get(r.header.Get("Location"))
	mustContain(t, "applied", page.body, "Restart requested for host "+itoa64(v.ID), ">apply requested</span>", ">skew</span>")
	mustNotContain(t, "applied", page.body, `data-open-dialog="apply-`+itoa64(v.ID)+`"`)
	c := bx.fetch()
	if !c.Assignments[0].Apply {
		t.Fatal("the box was not told to apply")
	}
	bx.runs(v.ID, c.Assignments[0].Revision)
	page = b.get("/ui/fleet")
	now := getHost(t, h, v.ID)
	mustContain(t, "in sync", page.body, `applied <code title="`+now.Revision+`">`)
	mustNotContain(t, "in sync", page.body, ">skew</span>", ">apply requested</span>", "-changes\"")

	r = b.postCSRF("/ui/fleet/"+itoa64(v.ID)+"/retire", url.Values{"org": {"default"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/fleet/"+itoa64(v.ID)+"?done=retired&org=default" {
		t.Fatalf("retire: %d %q", r.status, r.header.Get("Location"))
	}
	if got := getHost(t, h, v.ID); got.State != "retired" {
		t.Fatalf("state after retire: %s", got.State)
	}
	detail := b.get(r.header.Get("Location"))
	mustContain(t, "retired", detail.body, "Host retired", `<span class="status st-off">retired</span>`, "A retired host cannot be changed")
	mustNotContain(t, "retired", detail.body, "Retire host "+itoa64(v.ID))
	// Retired hosts leave the default board, and stay under "all".
	mustContain(t, "board", b.get("/ui/fleet").body, "No host matches.", `Fleet <span class="count">(0)</span>`)
	mustContain(t, "all", b.get("/ui/fleet?state=all").body, `id="host-`+itoa64(v.ID)+`"`)
	// Applying a retired host: the Service's refusal, on the page.
	r = b.postCSRF("/ui/fleet/"+itoa64(v.ID)+"/apply", url.Values{"org": {"default"}})
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("apply a retired host: %d", r.status)
	}
	mustContain(t, "refused apply", r.body, "is retired", `<code class="code">host_retired</code>`)
	if r = b.postCSRF("/ui/fleet/999/apply", url.Values{"org": {"default"}}); r.status != http.StatusNotFound || !strings.Contains(r.body, "not_found") {
		t.Fatalf("apply a missing host: %d", r.status)
	}
}

// TestFleetRecipeErrorsStayOnTheForm: what does not parse, what the
// recipe rules refuse and a broken pool contract each show beside the
// field they name, with what was typed; nothing changes.
func TestFleetRecipeErrorsStayOnTheForm(t *testing.T) {
	h := newHarness(t, Options{})
	first := addHost(t, h, "10.0.0.5", 8000, "qwen3", testRecipe("32768"))
	second := addHost(t, h, "10.0.0.6", 8000, "qwen3", testRecipe("32768", "--gpu-memory-utilization", "0.9"))
	b := h.browser()
	b.login(h.token)
	path := "/ui/fleet/" + itoa64(second.ID)

	r := b.postCSRF(path, hostFields(second, "recipe.vllm.vram_gb", "lots", "port", "80x0"))
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("unparsable: %d", r.status)
	}
	mustContain(t, "unparsable", r.body, `id="err-recipe.vllm.vram_gb"`, "must be a number of GB", `value="lots"`,
		`id="err-port"`, "must be a whole number", `value="80x0"`)

	// Recipe rules: a reserved flag on line 4, a source field of another
	// kind.
	r = b.postCSRF(path, hostFields(second, "recipe.vllm.args", "--max-model-len\n32768\n\n--port\n9000", "recipe.vllm.source.url", "http://x/y"))
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("recipe rules: %d", r.status)
	}
	mustContain(t, "recipe rules", r.body, `id="err-recipe.vllm.args"`, "line 4: --port is set by the fleet from the host&#39;s port field",
		`id="err-recipe.vllm.source.url"`, "does not apply to source kind hf", `<code class="code">validation_failed</code>`,
		"--max-model-len\n32768\n\n--port\n9000</textarea>")

	// The pool contract: another host serving qwen3 has 32768.
	r = b.postCSRF(path, hostFields(second, "recipe.vllm.args", "--max-model-len=40960", "notes", "typed note"))
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("pool contract: %d", r.status)
	}
	mustContain(t, "pool contract", r.body, `<code class="code">pool_contract_mismatch</code>`, `id="err-recipe.vllm"`,
		"--max-model-len differs from host "+itoa64(first.ID), "--max-model-len=40960</textarea>", "typed note</textarea>")
	if got := getHost(t, h, second.ID); got.Revision != second.Revision || got.Notes != second.Notes {
		t.Fatalf("a refused edit changed the host: %+v", got)
	}
	// Tuning may differ: accepted, and a notes-only save keeps the
	// revision.
	r = b.postCSRF(path, hostFields(second, "recipe.vllm.args", "--max-model-len\n32768\n--gpu-memory-utilization\n0.8"))
	if r.status != http.StatusSeeOther {
		t.Fatalf("tuning change: %d %s", r.status, r.body)
	}
	tuned := getHost(t, h, second.ID)
	r = b.postCSRF(path, hostFields(tuned, "notes", "kill after"))
	if r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "done=updated") {
		t.Fatalf("notes only: %d %q", r.status, r.header.Get("Location"))
	}
	if got := getHost(t, h, second.ID); got.Revision != tuned.Revision || got.Notes != "kill after" {
		t.Fatalf("notes-only save: %+v", got)
	}
}

// TestFleetCreateHostShowsItsKeyOnce: adding a host shows its key once, in
// the answer to the POST; its page and the board never show it.
func TestFleetCreateHostShowsItsKeyOnce(t *testing.T) {
	h := newHarness(t, Options{})
	b := h.browser()
	b.login(h.token)
	form := url.Values{"org": {"default"}, "ip": {"10.0.0.9"}, "port": {"8000"}, "project": {"default"}, "model_name": {"qwen3"},
		"recipe.vllm.model": {"Qwen/Qwen3-8B"}, "recipe.vllm.source.kind": {"hf"}, "recipe.vllm.vram_gb": {"12"},
		"recipe.vllm.disk_gb": {"18"}, "recipe.vllm.args": {"--max-model-len\n32768"}, "notes": {"new box"}}

	bad := url.Values{}
	for k, v := range form {
		bad[k] = v
	}
	bad.Set("ip", "169.254.169.254")
	bad.Set("model_name", "")
	r := b.postCSRF("/ui/fleet/_new", bad)
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("bad host: %d", r.status)
	}
	mustContain(t, "bad host", r.body, `id="err-ip"`, "link-local and cloud metadata addresses are refused", `id="err-model_name"`,
		`value="169.254.169.254"`, "new box</textarea>")

	r = b.postCSRF("/ui/fleet/_new", form)
	if r.status != http.StatusOK {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	hosts, _ := h.svc.ListHosts(context.Background(), "default", admin.PageRequest{})
	if len(hosts.Data) != 1 {
		t.Fatalf("hosts %+v", hosts.Data)
	}
	id := itoa64(hosts.Data[0].ID)
	m := hostKeyRe.FindString(r.body)
	if m == "" {
		t.Fatalf("no host key in the create answer:\n%s", r.body)
	}
	mustContain(t, "created", r.body, "Host key of host "+id, `data-show-on-load data-remove-on-close`, `data-copy="`+m+`"`, "Host added.")
	if outside := outsideDialog(t, r.body); strings.Contains(outside, m) {
		t.Fatalf("the key shows outside its dialog:\n%s", outside)
	}
	for _, p := range []string{"/ui/fleet", "/ui/fleet/" + id, "/ui/fleet/" + id + "?done=created"} {
		testkit.AssertNoSecrets(t, p, b.get(p).body, m)
	}
	// Through htmx: the content alone, and the address bar moves to the
	// host's plain page.
	form.Set("ip", "10.0.0.10")
	form.Set("csrf", b.csrf())
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/ui/fleet/_new", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	r = b.do(req)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("HX-Replace-Url"), "/ui/fleet/") || strings.Contains(r.body, "<html") {
		t.Fatalf("htmx create: %d %q %.200s", r.status, r.header.Get("HX-Replace-Url"), r.body)
	}
	mustContain(t, "htmx create", r.body, "data-show-on-load", "rh-")
}

// outsideDialog is the page without its secret-once dialog.
func outsideDialog(t *testing.T, body string) string {
	t.Helper()
	i := strings.Index(body, "<dialog class=\"modal\" data-show-on-load")
	j := strings.Index(body[max(i, 0):], "</dialog>")
	if i < 0 || j < 0 {
		t.Fatalf("no secret-once dialog in:\n%s", body)
	}
	return body[:i] + body[i+j:]
}

// TestFleetNotesInline: the board's inline form saves notes; through htmx
// the answer is the cell alone, and a refused note keeps what was typed.
func TestFleetNotesInline(t *testing.T) {
	h := newHarness(t, Options{})
	v := addHost(t, h, "10.0.0.5", 8000, "qwen3", testRecipe("32768"))
	b := h.browser()
	b.login(h.token)
	htmx := func(notes string) response {
		form := url.Values{"org": {"default"}, "notes": {notes}}
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/ui/fleet/"+itoa64(v.ID)+"/notes?from=list", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("HX-Request", "true")
		req.Header.Set("X-CSRF-Token", b.csrf())
		return b.do(req)
	}
	r := htmx("<b>kill</b> after the scan")
	if r.status != http.StatusOK || strings.Contains(r.body, "<table") {
		t.Fatalf("inline notes: %d %s", r.status, r.body)
	}
	mustContain(t, "cell", r.body, `<span class="notes-text">&lt;b&gt;kill&lt;/b&gt; after the scan</span>`)
	if got := getHost(t, h, v.ID); got.Notes != "<b>kill</b> after the scan" {
		t.Fatalf("notes %q", got.Notes)
	}
	long := strings.Repeat("n", 4097)
	r = htmx(long)
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("long notes: %d", r.status)
	}
	mustContain(t, "long notes", r.body, "must be at most 4096 characters", "validation_failed", "<details class=\"inline-edit\" open>", long+"</textarea>")
	if got := getHost(t, h, v.ID); got.Notes != "<b>kill</b> after the scan" {
		t.Fatal("a refused note changed the host")
	}
	// Without htmx: post/redirect/get back to the board.
	r = b.postCSRF("/ui/fleet/"+itoa64(v.ID)+"/notes?from=list", url.Values{"org": {"default"}, "notes": {"plain"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/fleet?done=notes&host="+itoa64(v.ID)+"&org=default" {
		t.Fatalf("plain notes: %d %q", r.status, r.header.Get("Location"))
	}
	r = b.postCSRF("/ui/fleet/"+itoa64(v.ID)+"/notes?from=list", url.Values{"org": {"default"}, "notes": {long}})
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("plain long notes: %d", r.status)
	}
	mustContain(t, "plain long notes", r.body, "must be at most 4096 characters", "<table", long+"</textarea>")
}

// TestBrowserApplyPendingFleetRestart: a host whose recipe changed shows
// its skew and what the restart would change; Apply opens a dialog naming
// the consequence, and once confirmed the board shows the request; when
// the box has fetched it and reports the new revision, the board shows
// the host in sync.
func TestBrowserApplyPendingFleetRestart(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	bx := newBox(t, h)
	v := addHost(t, h, "127.0.0.1", 8000, "qwen3", testRecipe("32768"))
	quiet := addHost(t, h, "10.0.0.6", 8000, "llama3", testRecipe("8192"))
	gone := addHost(t, h, "10.0.0.7", 8001, "llama3", testRecipe("8192"))
	bx.startAll()
	// Liveness colours for the screenshot: one box quiet for two days,
	// one for ten.
	if err := h.db.TouchHosts(ctx, []int64{quiet.ID}, time.Now().Add(-50*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := h.db.TouchHosts(ctx, []int64{gone.ID}, time.Now().Add(-10*24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	rc := testRecipe("32768", "--gpu-memory-utilization", "0.85")
	if _, err := h.svc.PatchHost(ctx, "default", itoa64(v.ID), admin.HostPatch{Recipe: &rc}); err != nil {
		t.Fatal(err)
	}
	id := itoa64(v.ID)
	row, dialog := "#host-"+id, "#apply-"+id

	tb := newTab(t, h)
	tb.login(h.token)
	tb.navigate("fleet", "/ui/fleet", chromedp.Click(chromedp.CSS(`.sidebar a[href^="/ui/fleet"]`)), chromedp.WaitVisible(chromedp.CSS("#fleet-table")))
	if got := tb.text(row); !strings.Contains(got, "skew") || !strings.Contains(got, "pending") || !strings.Contains(got, "rented for the scan") {
		t.Fatalf("host row: %q", got)
	}
	if got := tb.text(row + "-changes"); !strings.Contains(got, "--max-model-len 32768 --gpu-memory-utilization 0.85") {
		t.Fatalf("details row: %q", got)
	}
	tb.screenshot("fleet")
	tb.do("open the dialog", chromedp.Click(chromedp.CSS(`button[data-open-dialog="apply-`+id+`"]`)), chromedp.WaitVisible(chromedp.CSS(dialog)))
	if got := tb.text(dialog); !strings.Contains(got, "Restart host "+id+" onto revision") || !strings.Contains(got, "once its requests in flight finish") {
		t.Fatalf("dialog: %q", got)
	}
	tb.screenshot("fleet-apply-confirm")
	tb.navigate("confirm", "/ui/fleet", chromedp.Click(chromedp.CSS(dialog+` button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
	tb.waitFor("apply requested", `document.querySelector('`+row+`').innerText.includes('apply requested')`)
	if getHost(t, h, v.ID).ApplyRequested != true {
		t.Fatal("the host has no apply request")
	}

	// The box fetches, sees apply, restarts and reports the new revision.
	c := bx.fetch()
	if len(c.Assignments) != 1 || !c.Assignments[0].Apply {
		t.Fatalf("the box's assignment: %+v", c.Assignments)
	}
	bx.runs(v.ID, c.Assignments[0].Revision)
	tb.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#fleet-table")))
	tb.waitFor("in sync", `(() => { const r = document.querySelector('`+row+`').innerText;
		return r.includes('applied `+c.Assignments[0].Revision[:8]+`') && !r.includes('skew') && !r.includes('apply requested') &&
			!document.querySelector('`+row+`-changes'); })()`)
	tb.screenshot("fleet-in-sync")

	// Notes edited inline, through htmx.
	tb.do("edit notes", chromedp.Click(chromedp.CSS(row+` .inline-edit summary`)), chromedp.WaitVisible(chromedp.CSS("#notes-"+id)))
	tb.do("type notes", chromedp.SetValue(chromedp.CSS("#notes-"+id), "kill after the scan"),
		chromedp.Click(chromedp.CSS(row+` .inline-edit button[type=submit]`)))
	tb.waitFor("notes saved", `document.querySelector('`+row+` .notes-text').innerText === 'kill after the scan'`)
	if got := getHost(t, h, v.ID).Notes; got != "kill after the scan" {
		t.Fatalf("notes %q", got)
	}

	// The host's page: recipe and edit form.
	tb.navigate("host page", "/ui/fleet/"+id, chromedp.Click(chromedp.CSS(row+` a[href^="/ui/fleet/`+id+`"]`)), chromedp.WaitVisible(chromedp.CSS("#recipe-view")))
	tb.screenshot("fleet-host")
	tb.clean()
}
