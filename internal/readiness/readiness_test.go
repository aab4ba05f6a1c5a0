package readiness

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/testkit"
)

func TestConfiguredProviderThresholds(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, "")
	eng.set("/v1/models", 200, vllmModels(vllmCard("m", 8192)))
	c, _ := newTestCache(t, Config{FailAfter: 2, RecoverAfter: 2})
	var changes countingFn
	c.OnChange(changes.call)
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: eng.url() + "/v1", Credential: secretKey}})

	// Optimistic start: ready before any probe.
	st := mustStatus(t, c, 1)
	if !st.Ready || st.Reason != "" || !st.LastProbe.IsZero() {
		t.Fatalf("before any probe: %+v, want ready, no reason, zero LastProbe", st)
	}

	step := func(health int, wantReady bool, wantReason string) {
		t.Helper()
		eng.set("/health", health, "")
		c.ProbeAll(context.Background())
		st := mustStatus(t, c, 1)
		if st.Ready != wantReady || !strings.Contains(st.Reason, wantReason) || (wantReason == "" && st.Reason != "") {
			t.Fatalf("after /health %d: %+v, want ready=%v reason containing %q", health, st, wantReady, wantReason)
		}
		if !st.Facts.Equal(Facts{}) {
			t.Fatalf("a configured provider has no discovered facts: %+v", st.Facts)
		}
	}
	step(200, true, "")
	step(500, true, "")                                                  // 1 of 2 failures
	step(200, true, "")                                                  // a success resets the count
	step(500, true, "")                                                  // 1 of 2
	step(500, false, "health probe failed: GET /health: returned 500")   // 2 of 2: down
	step(200, false, "recovering: 1 of 2 consecutive successful probes") // 1 of 2 successes
	step(500, false, "health probe failed: GET /health: returned 500")   // reset
	step(200, false, "recovering: 1 of 2")                               //
	step(200, true, "")                                                  // 2 of 2: up
	if changes.n() != 2 || changes.overlap.Load() {
		t.Fatalf("OnChange calls = %d (overlap %v), want 2: one down, one up", changes.n(), changes.overlap.Load())
	}

	for key, n := range eng.requests() {
		if key != "GET /health" {
			t.Errorf("configured vllm provider sent %d x %q; only GET /health is allowed", n, key)
		}
	}
	if got := eng.hits("GET /health"); got != 9 {
		t.Fatalf("GET /health hits = %d, want 9", got)
	}
	if got := eng.lastHeaders("GET /health").Get("Authorization"); got != "Bearer "+secretKey.Reveal() {
		t.Fatalf("Authorization = %q", got)
	}
}

func TestUpstreamNeedsOneSuccessToStartWhateverRecoverAfter(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 503, "")
	eng.set("/v1/models", 200, vllmModels(vllmCard("m", 4096)))
	c, _ := newTestCache(t, Config{RecoverAfter: 3})
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: eng.url() + "/v1", Upstream: true}})

	c.ProbeAll(context.Background())
	st := mustStatus(t, c, 1)
	if st.Ready || st.Reason != "health probe failed: GET /health: returned 503" || !st.LastProbe.Equal(testEpoch) {
		t.Fatalf("engine warming up: %+v", st)
	}
	// Never ready before, so nothing to damp: the first success is enough.
	eng.set("/health", 200, "")
	c.ProbeAll(context.Background())
	if st := mustStatus(t, c, 1); !st.Ready || st.Facts.Context != 4096 {
		t.Fatalf("first success: %+v, want ready", st)
	}
	// Once it has been ready, RecoverAfter applies.
	eng.set("/v1/models", 200, "not json")
	c.ProbeAll(context.Background())
	eng.set("/v1/models", 200, vllmModels(vllmCard("m", 4096)))
	for i := 1; i <= 3; i++ {
		c.ProbeAll(context.Background())
		if st := mustStatus(t, c, 1); st.Ready != (i == 3) {
			t.Fatalf("success %d of RecoverAfter 3: %+v", i, st)
		}
	}
}

func TestUnusableMetadata(t *testing.T) {
	for _, tc := range []struct {
		name, kind, models, props, reason string
	}{
		{"malformed json", store.KindVLLM, `{"object":"list","data":[{"id":"m",`, "", "GET /models: malformed JSON"},
		{"html", store.KindVLLM, `<html>Bad Gateway</html>`, "", "GET /models: malformed JSON"},
		{"no data", store.KindVLLM, `{"object":"list"}`, "", `no "data" array`},
		{"no id", store.KindVLLM, `{"data":[{"object":"model","max_model_len":8}]}`, "", "the model has no id"},
		{"string context", store.KindVLLM, `{"data":[{"id":"m","max_model_len":"8192"}]}`, "", `max_model_len is "8192", not a positive integer`},
		{"zero context", store.KindSGLang, `{"data":[{"id":"m","max_model_len":0}]}`, "", "max_model_len is 0"},
		{"no context", store.KindVLLM, `{"data":[{"id":"m","max_model_len":null}]}`, "", `model "m" reports no context length`},
		{"bad props", store.KindLlamaCpp, llamaModels("m", 8, 8), `{"default_generation_settings":{"n_ctx":-1}}`, "default_generation_settings.n_ctx is -1"},
		{"props not json", store.KindLlamaCpp, llamaModels("m", 8, 8), `nope`, "GET /props: malformed JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eng := newEngine(t)
			eng.set("/health", 200, "")
			eng.set("/v1/models", 200, tc.models)
			if tc.props != "" {
				eng.set("/props", 200, tc.props)
			}
			c, _ := newTestCache(t, Config{FailAfter: 10})
			c.Sync([]Provider{{ID: 1, Kind: tc.kind, BaseURL: eng.url() + "/v1", Upstream: true}})
			c.ProbeAll(context.Background())
			st := mustStatus(t, c, 1)
			if st.Ready || !strings.Contains(st.Reason, tc.reason) {
				t.Fatalf("%+v, want not ready with reason containing %q", st, tc.reason)
			}
		})
	}
}

func TestMetadataEndpointFailureCountsTowardFailAfter(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, "")
	eng.set("/v1/models", 200, vllmModels(vllmCard("m", 8192)))
	c, _ := newTestCache(t, Config{FailAfter: 2})
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: eng.url() + "/v1", Upstream: true}})
	c.ProbeAll(context.Background())

	eng.set("/v1/models", 502, `{"object":"error","message":"upstream hiccup","type":"BadGateway","code":502}`)
	c.ProbeAll(context.Background())
	if st := mustStatus(t, c, 1); !st.Ready || st.Facts.ModelID != "m" {
		t.Fatalf("one failed /models: %+v, want still ready on the last facts", st)
	}
	c.ProbeAll(context.Background())
	st := mustStatus(t, c, 1)
	if want := "metadata probe failed: GET /models: returned 502: upstream hiccup"; st.Ready || st.Reason != want {
		t.Fatalf("%+v, want not ready with %q", st, want)
	}
}

func TestCredentialSentAndNeverLogged(t *testing.T) {
	key := secretKey.Reveal()
	var seen sync.Map
	// An OpenAI-style upstream that refuses the key and quotes it back.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.URL.Path, r.Header.Clone())
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s.","type":"invalid_request_error","code":"invalid_api_key"}}`, key)
	}))
	defer srv.Close()

	c, logs := newTestCache(t, Config{FailAfter: 1})
	c.Sync([]Provider{
		{ID: 1, Kind: store.KindOpenAI, BaseURL: srv.URL + "/openai/v1", Credential: secretKey},
		{ID: 2, Kind: store.KindAnthropic, BaseURL: srv.URL + "/anthropic/v1", Credential: secretKey},
		{ID: 3, Kind: store.KindLlamaCpp, BaseURL: srv.URL + "/llama/v1", Credential: secretKey, Upstream: true},
	})
	c.ProbeAll(context.Background())

	h := func(path string) http.Header {
		v, ok := seen.Load(path)
		if !ok {
			t.Fatalf("no request to %s", path)
		}
		return v.(http.Header)
	}
	if got := h("/openai/v1/models").Get("Authorization"); got != "Bearer "+key {
		t.Errorf("openai Authorization = %q", got)
	}
	if a := h("/anthropic/v1/models"); a.Get("X-Api-Key") != key || a.Get("Anthropic-Version") != "2023-06-01" || a.Get("Authorization") != "" {
		t.Errorf("anthropic headers = %v", a)
	}
	if got := h("/llama/health").Get("Authorization"); got != "Bearer "+key {
		t.Errorf("llamacpp Authorization = %q", got)
	}

	for id := int64(1); id <= 3; id++ {
		st := mustStatus(t, c, id)
		if st.Ready || !strings.Contains(st.Reason, "returned 401") {
			t.Errorf("provider %d: %+v, want not ready on 401", id, st)
		}
		if strings.Contains(fmt.Sprintf("%+v", st), key) {
			t.Errorf("provider %d status leaks the key: %+v", id, st)
		}
	}
	out := logs.String()
	if !strings.Contains(out, "provider not ready") {
		t.Fatalf("expected transition logs, got:\n%s", out)
	}
	if strings.Contains(out, key) {
		t.Fatalf("logs leak the key:\n%s", out)
	}
}

func TestBodyCap(t *testing.T) {
	// An endless /models body: the probe must stop reading at the cap. If
	// it read everything, this test would never end.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		if _, err := w.Write([]byte(`{"object":"list","data":[`)); err != nil {
			return
		}
		chunk := []byte(strings.Repeat(vllmCard("m", 8192)+",", 64))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()

	c, _ := newTestCache(t, Config{MaxBody: 64 << 10, FailAfter: 10})
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: srv.URL + "/v1", Upstream: true}})
	c.ProbeAll(context.Background())
	st := mustStatus(t, c, 1)
	if want := "GET /models: body too large: over 65536 bytes"; st.Ready || st.Reason != want {
		t.Fatalf("%+v, want not ready at once with %q", st, want)
	}
}

func TestConnectionRefusedAndTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()

	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // answers only when the client gives up
	}))
	defer hang.Close()

	c, _ := newTestCache(t, Config{Timeout: 50 * time.Millisecond})
	c.Sync([]Provider{
		{ID: 1, Kind: store.KindSGLang, BaseURL: refused + "/v1", Upstream: true},
		{ID: 2, Kind: store.KindVLLM, BaseURL: hang.URL + "/v1", Upstream: true},
	})
	c.ProbeAll(context.Background())
	if st := mustStatus(t, c, 1); st.Ready || !strings.HasPrefix(st.Reason, "health probe failed: GET /health: ") ||
		!strings.Contains(st.Reason, "connection refused") || strings.Contains(st.Reason, refused) {
		t.Errorf("refused: %+v", st)
	}
	if st := mustStatus(t, c, 2); st.Ready || st.Reason != "health probe failed: GET /health: timed out after 50ms" {
		t.Errorf("hanging: %+v", st)
	}
}

func TestCancelledProbeIsDiscarded(t *testing.T) {
	entered := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	defer srv.Close()

	c, _ := newTestCache(t, Config{FailAfter: 1})
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: srv.URL + "/v1"}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-entered; cancel() }()
	c.ProbeAll(ctx)
	if st := mustStatus(t, c, 1); !st.Ready || !st.LastProbe.IsZero() || st.LastError != "" {
		t.Fatalf("a probe cut short by shutdown must not count: %+v", st)
	}
}

func TestSyncKeepsUnchangedAndResetsChanged(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, "")
	eng.set("/v1/models", 200, vllmModels(vllmCard("m", 8192)))
	other := newEngine(t)
	other.set("/health", 500, "")
	clock := clock.NewManual(testEpoch)
	c := New(Config{FailAfter: 1}, clock, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, nil)

	up := Provider{ID: 1, Kind: store.KindVLLM, BaseURL: eng.url() + "/v1", Upstream: true}
	cfgd := Provider{ID: 2, Kind: store.KindVLLM, BaseURL: other.url() + "/v1"}
	gone := Provider{ID: 3, Kind: store.KindVLLM, BaseURL: eng.url() + "/v1"}
	c.Sync([]Provider{up, cfgd, gone})
	c.ProbeAll(context.Background())
	if st := mustStatus(t, c, 1); !st.Ready || st.Facts.ModelID != "m" {
		t.Fatalf("upstream: %+v", st)
	}
	if st := mustStatus(t, c, 2); st.Ready {
		t.Fatalf("configured with failing health: %+v", st)
	}

	clock.Advance(time.Minute)
	// Same key, new credential (and a trailing slash, which Sync strips):
	// state kept. Provider 2 moves to a new URL: fresh, optimistic. 3 goes.
	up.Credential = secretKey
	up.BaseURL += "/"
	moved := cfgd
	moved.BaseURL = eng.url() + "/v1"
	c.Sync([]Provider{up, moved})

	st := mustStatus(t, c, 1)
	if !st.Ready || st.Facts.ModelID != "m" || !st.LastProbe.Equal(testEpoch) {
		t.Fatalf("unchanged provider lost its state: %+v", st)
	}
	st = mustStatus(t, c, 2)
	if !st.Ready || !st.LastProbe.IsZero() || st.LastError != "" {
		t.Fatalf("changed provider kept old state: %+v", st)
	}
	if _, ok := c.Status(3); ok {
		t.Fatal("removed provider still known")
	}

	c.ProbeAll(context.Background())
	if got := eng.lastHeaders("GET /v1/models").Get("Authorization"); got != "Bearer "+secretKey.Reveal() {
		t.Fatalf("new credential not used: Authorization = %q", got)
	}
	if st := mustStatus(t, c, 1); !st.LastProbe.Equal(testEpoch.Add(time.Minute)) {
		t.Fatalf("LastProbe = %v, want the manual clock's time", st.LastProbe)
	}

	// Switching the metadata source is a different provider: fresh and
	// (being upstream now) not ready until probed.
	sw := moved
	sw.Upstream = true
	c.Sync([]Provider{up, sw})
	if st := mustStatus(t, c, 2); st.Ready || st.Reason != ReasonNoProbe {
		t.Fatalf("provider switched to upstream: %+v", st)
	}
}

func TestRunProbesUntilCancelled(t *testing.T) {
	var probes atomic.Int64
	enough := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if probes.Add(1) == 5 {
			close(enough)
		}
	}))
	defer srv.Close()

	c, _ := newClockedCache(t, Config{Interval: 20 * time.Millisecond}, clock.System)
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: srv.URL + "/v1"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()

	select {
	case <-enough:
	case <-time.After(10 * time.Second):
		t.Fatalf("only %d probes in 10s at a 20ms interval", probes.Load())
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if st := mustStatus(t, c, 1); !st.Ready || st.LastProbe.IsZero() {
		t.Fatalf("%+v", st)
	}
}

func TestRunFollowsSync(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, "")
	eng.set("/v1/models", 200, vllmModels(vllmCard("m", 8192)))
	c, _ := newClockedCache(t, Config{Interval: 10 * time.Millisecond}, clock.System)
	ready := make(chan struct{})
	var once sync.Once
	c.OnChange(func() {
		if st, ok := c.Status(2); ok && st.Ready {
			once.Do(func() { close(ready) })
		}
	})
	c.Sync(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// A provider added while Run runs is probed at once.
	c.Sync([]Provider{{ID: 2, Kind: store.KindVLLM, BaseURL: eng.url() + "/v1", Upstream: true}})
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("provider added during Run never became ready")
	}

	// Removed: its loop stops.
	c.Sync(nil)
	before := eng.hits("GET /health")
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(50 * time.Millisecond)
		after := eng.hits("GET /health")
		if after == before {
			break // no probe in 50ms at a 10ms interval: stopped
		}
		before = after // an in-flight probe may land once after Sync
		if time.Now().After(deadline) {
			t.Fatal("removed provider is still being probed")
		}
	}
}

func TestOnChangeNeverOverlaps(t *testing.T) {
	// Many providers flipping together, many times, under -race.
	eng := newEngine(t)
	eng.set("/health", 200, "")
	c, _ := newTestCache(t, Config{FailAfter: 1})
	var fn countingFn
	slow := func() { fn.call(); time.Sleep(time.Millisecond) }
	c.OnChange(slow)
	var ps []Provider
	for i := range 16 {
		ps = append(ps, Provider{ID: int64(i), Kind: store.KindVLLM, BaseURL: eng.url() + "/v1"})
	}
	c.Sync(ps)
	for i := range 20 {
		eng.set("/health", []int{500, 200}[i%2], "")
		c.ProbeAll(context.Background())
		for _, p := range ps {
			if st := mustStatus(t, c, p.ID); st.Ready != (i%2 == 1) {
				t.Fatalf("round %d provider %d: %+v", i, p.ID, st)
			}
		}
	}
	if fn.overlap.Load() {
		t.Fatal("OnChange calls overlapped")
	}
	if fn.n() < 20 {
		t.Fatalf("OnChange called %d times for 20 rounds of changes", fn.n())
	}
}

func TestStatusUnknownProvider(t *testing.T) {
	c := New(Config{}, nil, nil, nil)
	if _, ok := c.Status(42); ok {
		t.Fatal("unknown provider reported")
	}
	c.ProbeAll(context.Background()) // no providers: returns at once
}

// TestProbeSoon: a provider probed at a long interval is probed again at
// once when ProbeSoon asks, repeats that arrive together are one probe's
// worth, and an unknown provider is ignored.
func TestProbeSoon(t *testing.T) {
	eng := newEngine(t)
	eng.set("/health", 200, "")
	c, _ := newTestCache(t, Config{Interval: time.Hour})
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: eng.url() + "/v1"}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// The first probe comes at once (never probed); the next would be an
	// hour later.
	testkit.Eventually(t, "the first probe", func() bool { return eng.hits("GET /health") == 1 })
	c.ProbeSoon(99) // unknown: nothing happens, nothing blocks
	c.ProbeSoon(1)
	testkit.Eventually(t, "the probe ProbeSoon asked for", func() bool { return eng.hits("GET /health") == 2 })
	for range 100 {
		c.ProbeSoon(1)
	}
	testkit.Eventually(t, "a probe for the burst", func() bool { return eng.hits("GET /health") >= 3 })
	// A hundred requests made while at most one was pending: at most two
	// probes for them (one pending, one running), not a hundred.
	c.ProbeSoon(1)
	testkit.Eventually(t, "a probe after the burst", func() bool { return eng.hits("GET /health") >= 4 })
	if n := eng.hits("GET /health"); n > 5 {
		t.Fatalf("%d probes for 102 ProbeSoon calls: repeats were not coalesced", n)
	}
}
