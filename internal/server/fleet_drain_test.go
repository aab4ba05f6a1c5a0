package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

// drainBox is a fake vLLM for the drain tests: /health, /v1/models and
// chat completions, with a restart switch (while restarting every request
// to it fails, as a real restart's would, and is counted), an optional
// gate that holds chats until it is opened, and a stuck mode that holds
// them until the caller gives up.
type drainBox struct {
	srv        *httptest.Server
	healthy    atomic.Bool
	restarting atomic.Bool
	stuck      atomic.Bool
	key        atomic.Value // string
	maxLen     atomic.Int64 // the card's max_model_len; 0: 32768, the recipe's
	chats      atomic.Int64 // answered 200
	lost       atomic.Int64 // reached the box while it restarted
	held       atomic.Int64 // chats waiting at the gate or stuck now
	cancelled  atomic.Int64 // stuck chats whose caller went away
	gate       chan struct{}
	gateOnce   sync.Once
}

func newDrainBox(t *testing.T, gated bool) *drainBox {
	b := &drainBox{gate: make(chan struct{})}
	if !gated {
		b.open()
	}
	b.key.Store("")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		if !b.healthy.Load() || b.restarting.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+b.key.Load().(string) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		n := b.maxLen.Load()
		if n == 0 {
			n = 32768
		}
		fmt.Fprintf(w, `{"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","max_model_len":%d}]}`, n)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if b.restarting.Load() {
			b.lost.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		b.held.Add(1)
		if b.stuck.Load() {
			<-r.Context().Done()
			b.cancelled.Add(1)
			b.held.Add(-1)
			return
		}
		select {
		case <-b.gate:
		case <-r.Context().Done():
		}
		b.held.Add(-1)
		b.chats.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","model":"Qwen/Qwen3-8B","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	})
	b.srv = httptest.NewServer(mux)
	t.Cleanup(func() { b.open(); b.srv.Close() })
	return b
}

func (b *drainBox) open() { b.gateOnce.Do(func() { close(b.gate) }) }

func (b *drainBox) port(t *testing.T) int {
	u, _ := url.Parse(b.srv.URL)
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// drainFleet is a gateway with a fleet key and a client key.
type drainFleet struct {
	r          *run
	tok        string
	vkey, fkey string
}

const drainTok = "tok-FLEET-FAKE-0123456789"

func startDrainFleet(t *testing.T, d string) *drainFleet {
	spec, dir := storetest.Spec(t, d)
	cfg := fleetConfig(spec, dir)
	cfg.Fleet.Controller.DrainInterval = 20 * time.Millisecond
	r := start(t, cfg)
	t.Cleanup(func() { _ = r.srv.Shutdown() })
	f := &drainFleet{r: r, tok: drainTok}
	_, body := r.call(t, "POST", "/admin/v1/orgs/default/projects/default/keys", drainTok, `{"name":"client"}`)
	f.vkey = decodeJSON[struct{ Secret string }](t, body).Secret
	_, body = r.call(t, "POST", "/admin/v1/orgs/default/fleet-keys", drainTok, `{"name":"template"}`)
	f.fkey = decodeJSON[struct{ Secret string }](t, body).Secret
	return f
}

// addHost adds a host for box, waits for it to serve, and reports its
// revision applied, as the agent would.
func (f *drainFleet) addHost(t *testing.T, b *drainBox, drainTimeout string) int64 {
	t.Helper()
	code, body := f.r.call(t, "POST", "/admin/v1/orgs/default/hosts", f.tok, fmt.Sprintf(
		`{"ip":"127.0.0.1","port":%d,"model_name":"qwen3","drain_timeout":%q,"recipe":`+recipeJSON+`}`, b.port(t), drainTimeout, ""))
	if code != 201 {
		t.Fatalf("create host: %d %s", code, body)
	}
	h := decodeJSON[hostJSON](t, body)
	b.key.Store(h.APIKey)
	b.healthy.Store(true)
	f.r.waitState(t, f.tok, h.ID, "serving")
	f.report(t, h.ID, h.Revision)
	return h.ID
}

func (f *drainFleet) report(t *testing.T, id int64, rev string) {
	t.Helper()
	code, body := f.r.fleet(t, "POST", "/vllm/report", f.fkey, fmt.Sprintf(`{"applied":[{"host_id":%d,"revision":%q}]}`, id, rev))
	if code != 200 {
		t.Fatalf("report: %d %s", code, body)
	}
}

// newRevision changes a tuning flag of the host's recipe: a new revision
// within the pool contract.
func (f *drainFleet) newRevision(t *testing.T, id int64) {
	t.Helper()
	code, body := f.r.call(t, "PATCH", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d", id), f.tok,
		`{"recipe":`+fmt.Sprintf(recipeJSON, `,"--gpu-memory-utilization","0.85"`)+`}`)
	if code != 200 || !decodeJSON[hostJSON](t, body).Skew {
		t.Fatalf("patch: %d %s", code, body)
	}
}

// assignment is the box's current assignment for host id.
func (f *drainFleet) assignment(t *testing.T, id int64) fleetapi.Assignment {
	t.Helper()
	code, body := f.r.fleet(t, "GET", "/vllm/config", f.fkey, "")
	if code != 200 {
		t.Fatalf("/vllm/config: %d %s", code, body)
	}
	for _, a := range decodeJSON[fleetapi.Config](t, body).Assignments {
		if a.HostID == id {
			return a
		}
	}
	t.Fatalf("no assignment for host %d: %s", id, body)
	return fleetapi.Assignment{}
}

// restartWhenAllowed is the agent's side: it fetches until the gateway
// allows the restart, then restarts the box onto the new revision and
// reports it. Only an agent that ignores the drain field is modelled:
// it restarts on apply alone, so the gateway must withhold apply.
func (f *drainFleet) restartWhenAllowed(t *testing.T, b *drainBox, id int64) {
	t.Helper()
	var a fleetapi.Assignment
	testkit.Eventually(t, "the gateway allows the restart", func() bool {
		a = f.assignment(t, id)
		if a.Apply && (a.Drain == nil || a.Drain.State != fleetapi.DrainDrained) {
			t.Fatalf("apply sent before the drain finished: %+v", a.Drain)
		}
		return a.Apply
	})
	b.restarting.Store(true)
	f.report(t, id, a.Revision)
	b.restarting.Store(false)
}

// chat sends one request and returns its status, Retry-After and body.
func (f *drainFleet) chat(ctx context.Context) (int, string, string, error) {
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://"+f.r.addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"qwen3","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+f.vkey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(body), nil
}

// TestRollingApplyDropsNothing: two hosts behind one route under steady
// load (4 clients looping); one is applied. It drains, restarts and comes
// back; no client sees an error and no request reaches it while it
// restarts.
func TestRollingApplyDropsNothing(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		f := startDrainFleet(t, d)
		a, b := newDrainBox(t, false), newDrainBox(t, false)
		ida := f.addHost(t, a, "3s")
		f.addHost(t, b, "3s")
		f.r.waitListed(t, f.vkey, "qwen3", true)
		testkit.Eventually(t, "both hosts take traffic", func() bool {
			_, _, _, _ = f.chat(context.Background())
			return a.chats.Load() > 0 && b.chats.Load() > 0
		})
		f.newRevision(t, ida)

		ctx, stop := context.WithCancel(context.Background())
		var errs, ok atomic.Int64
		var firstErr atomic.Value
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					code, _, body, err := f.chat(ctx)
					switch {
					case ctx.Err() != nil:
					case err != nil || code != 200:
						errs.Add(1)
						firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %v %s", code, err, body))
					default:
						ok.Add(1)
					}
				}
			}()
		}
		code, body := f.r.call(t, "POST", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d/apply", ida), f.tok, "")
		if code != 200 || decodeJSON[hostJSON](t, body).State != "draining" {
			t.Fatalf("apply: %d %s", code, body)
		}
		f.restartWhenAllowed(t, a, ida)
		f.r.waitState(t, f.tok, ida, "serving")
		before := a.chats.Load()
		testkit.Eventually(t, "the restarted host takes traffic again", func() bool { return a.chats.Load() > before+5 })
		stop()
		wg.Wait()
		t.Logf("rolling apply under load: %d requests answered, %d client errors, %d reached the restarting box", ok.Load(), errs.Load(), a.lost.Load())
		if n := errs.Load(); n != 0 {
			t.Fatalf("%d client errors during a rolling apply; first: %v", n, firstErr.Load())
		}
		if n := a.lost.Load(); n != 0 {
			t.Fatalf("%d requests reached the restarting box", n)
		}
	})
}

// TestApplyWholePoolRefused: applying the last serving host of a pool is
// a 409 would_drain_pool, and allowed with force.
func TestApplyWholePoolRefused(t *testing.T) {
	f := startDrainFleet(t, "sqlite")
	a, b := newDrainBox(t, false), newDrainBox(t, false)
	ida, idb := f.addHost(t, a, "60s"), f.addHost(t, b, "60s")
	f.newRevision(t, ida)
	f.newRevision(t, idb)
	if code, body := f.r.call(t, "POST", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d/apply", ida), f.tok, ""); code != 200 {
		t.Fatalf("apply of the first host: %d %s", code, body)
	}
	code, body := f.r.call(t, "POST", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d/apply", idb), f.tok, "")
	if code != 409 || !strings.Contains(body, `"would_drain_pool"`) {
		t.Fatalf("apply of the pool's last serving host: %d %s", code, body)
	}
	if h := f.r.host(t, f.tok, idb); h.State != "serving" || h.ApplyRequested {
		t.Fatalf("a refused apply changed the host: %+v", h)
	}
	if as := f.assignment(t, idb); as.Apply || as.Drain != nil {
		t.Fatalf("a refused apply reached the box: %+v", as)
	}
	code, body = f.r.call(t, "POST", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d/apply", idb), f.tok, `{"force":true}`)
	if code != 200 || decodeJSON[hostJSON](t, body).State != "draining" {
		t.Fatalf("forced apply: %d %s", code, body)
	}
	if code, body := f.r.call(t, "POST", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d/apply", idb), f.tok, `{"force":"yes"}`); code != 400 {
		t.Fatalf("a bad force: %d %s", code, body)
	}
}

// TestSingleHostDrain: a pool of one host under load. Requests in flight
// at apply time finish; new ones get 503 pool_draining with Retry-After
// until the restarted host serves again.
func TestSingleHostDrain(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		f := startDrainFleet(t, d)
		box := newDrainBox(t, true)
		id := f.addHost(t, box, "8s") // on PostgreSQL the drain lasts until this deadline
		f.r.waitListed(t, f.vkey, "qwen3", true)
		f.newRevision(t, id)

		// Four requests in flight, held by the box.
		results := make(chan int, 4)
		for range 4 {
			go func() {
				code, _, _, err := f.chat(context.Background())
				if err != nil {
					code = -1
				}
				results <- code
			}()
		}
		testkit.Eventually(t, "four requests in flight", func() bool { return box.held.Load() == 4 })

		began := time.Now()
		code, body := f.r.call(t, "POST", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d/apply", id), f.tok, "")
		if code != 200 {
			t.Fatalf("apply: %d %s", code, body)
		}
		code, retry, body, err := f.chat(context.Background())
		if err != nil || code != 503 || retry == "" || !strings.Contains(body, `"pool_draining"`) {
			t.Fatalf("a new request while draining: %d Retry-After %q %s %v", code, retry, body, err)
		}
		if as := f.assignment(t, id); as.Apply || as.Drain == nil || as.Drain.State != fleetapi.DrainDraining {
			t.Fatalf("the box may restart while requests are in flight: %+v", as)
		}
		box.open()
		for range 4 {
			if code := <-results; code != 200 {
				t.Fatalf("a request in flight at apply time ended %d", code)
			}
		}

		done := make(chan struct{})
		go func() { defer close(done); f.restartWhenAllowed(t, box, id) }()
		var gap time.Duration
		testkit.Eventually(t, "the host serves again", func() bool {
			code, retry, body, err := f.chat(context.Background())
			switch {
			case err != nil:
				t.Fatalf("request during the restart: %v", err)
			case code == 200:
				gap = time.Since(began)
				return true
			case code != 503 || retry == "":
				t.Fatalf("request during the restart: %d Retry-After %q %s", code, retry, body)
			}
			return false
		})
		<-done
		t.Logf("single-host pool: out of service for %.2fs (apply to the first answer after the restart)", gap.Seconds())
		if box.lost.Load() != 0 {
			t.Fatalf("%d requests reached the restarting box", box.lost.Load())
		}
	})
}

// TestDrainDeadlineCuts: a request stuck past the drain deadline is cut
// and counted, and the box is allowed to restart.
func TestDrainDeadlineCuts(t *testing.T) {
	f := startDrainFleet(t, "sqlite")
	box := newDrainBox(t, false)
	id := f.addHost(t, box, "1s")
	f.r.waitListed(t, f.vkey, "qwen3", true)
	f.newRevision(t, id)
	box.stuck.Store(true)
	result := make(chan int, 1)
	go func() {
		code, _, _, err := f.chat(context.Background())
		if err != nil {
			code = -1
		}
		result <- code
	}()
	testkit.Eventually(t, "a stuck request in flight", func() bool { return box.held.Load() == 1 })
	if code, body := f.r.call(t, "POST", fmt.Sprintf("/admin/v1/orgs/default/hosts/%d/apply", id), f.tok, ""); code != 200 {
		t.Fatalf("apply: %d %s", code, body)
	}
	select {
	case code := <-result:
		if code == 200 || code == -1 {
			t.Fatalf("the cut request ended %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stuck request was not cut")
	}
	testkit.Eventually(t, "the box saw the cut", func() bool { return box.cancelled.Load() == 1 })
	testkit.Eventually(t, "the restart allowed after the deadline", func() bool { return f.assignment(t, id).Apply })
	_, metrics := f.r.call(t, "GET", "/metrics", "", "")
	if !strings.Contains(metrics, fmt.Sprintf(`rolter_fleet_drain_cut_requests_total{org="default",provider="host-%d"} 1`, id)) {
		t.Fatalf("the cut is not counted:\n%s", grepLines(metrics, "rolter_fleet_drain"))
	}
	if !strings.Contains(f.r.logs.String(), "drain deadline passed") {
		t.Fatal("the cut is not logged")
	}
}
