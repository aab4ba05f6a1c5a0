package gateway

// The fault scenarios of the reliability suite (docs/reliability.md) that
// live in the gateway. Scenarios already proven by a test elsewhere in this
// package are listed in the doc's table under that test's name; the tests
// here cover what those do not.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rolter/rolter/internal/cooldown"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/testkit"
)

// counterValue reads one counter of reg by name and exact labels (0 when
// absent).
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	m, ok := testkit.Series(t, reg, name, labels)
	if !ok {
		return 0
	}
	return m.GetCounter().GetValue()
}

// TestScenario01_UpstreamResetMidStream: the stream part (chunks, error
// event, no [DONE], usage class) is TestMidStreamBreakEndsWithErrorEvent;
// this adds the metrics and passive health: the attempt is counted as
// stream_broken and the target's breaker takes the failure.
func TestScenario01_UpstreamResetMidStream(t *testing.T) {
	h := newHarness(t, Config{Cooldown: cooldown.Config{Threshold: 1}})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		sseHeader(w)
		sseWrite(w, vllmStream[:2]...)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := conn.(interface{ SetLinger(int) error }); ok {
				_ = tc.SetLinger(0) // RST, not FIN
			}
			conn.Close()
		}
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	resp := h.post("/v1/chat/completions", `{"model":"m","stream":true}`)
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	if len(events) != 3 || !strings.Contains(events[2], `"code":"upstream_stream_error"`) {
		t.Fatalf("events: %q", events)
	}
	if v := counterValue(t, h.reg, "rolter_upstream_attempts_total", map[string]string{"provider": "p", "class": "stream_broken"}); v != 1 {
		t.Fatalf("stream_broken attempts %v, want 1", v)
	}
	if v := counterValue(t, h.reg, "rolter_requests_total", map[string]string{"provider": "p", "class": "stream_broken"}); v != 1 {
		t.Fatalf("stream_broken requests %v, want 1", v)
	}
	// Threshold 1: the one broken stream ejects the target.
	if st := h.gw.state(targetID{pid, ""}, false).breaker.State(); st != cooldown.StateCooling {
		t.Fatalf("breaker %s after a broken stream, want cooling", st)
	}
}

// TestScenario05_ClientDisconnectBeforeFirstByte: the client leaves while
// the upstream has not answered yet. Run 50 times (the suite runs under
// -race in CI).
func TestScenario05_ClientDisconnectBeforeFirstByte(t *testing.T) {
	const runs = 50
	h := newHarness(t, Config{})
	arrived := make(chan struct{}, runs)
	cancelled := make(chan time.Time, runs)
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		arrived <- struct{}{}
		<-r.Context().Done() // never a byte
		cancelled <- time.Now()
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	for i := range runs {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", h.srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m","stream":true}`))
		req.Header.Set("Authorization", "Bearer "+h.key)
		done := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		select {
		case <-arrived:
		case <-time.After(30 * time.Second):
			cancel()
			t.Fatalf("run %d: request never reached the upstream", i)
		}
		at := time.Now()
		cancel()
		if err := <-done; err == nil {
			t.Fatalf("run %d: the client got a response after cancelling", i)
		}
		// The cancel must travel to the upstream, not wait out a timeout:
		// the first-byte timeout is 300 s, so 30 s tells the two apart
		// with room for a loaded machine (no tight timing here).
		select {
		case got := <-cancelled:
			if d := got.Sub(at); d > 30*time.Second {
				t.Fatalf("run %d: upstream cancelled after %v", i, d)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("run %d: upstream never saw the cancel", i)
		}
	}
	// The handler records after the attempt returns.
	testkit.Eventually(t, "a usage record per request", func() bool { return len(h.usage.all()) >= runs })
	recs := h.usage.all()
	if len(recs) != runs {
		t.Fatalf("%d usage records for %d requests", len(recs), runs)
	}
	for _, r := range recs {
		if r.Status != 499 || r.Class != string(ClassClientCancelled) || r.Attempts != 1 {
			t.Fatalf("record %+v", r)
		}
	}
	if st := h.gw.state(targetID{pid, ""}, false).breaker.State(); st != cooldown.StateClosed {
		t.Fatalf("target penalised: %s", st)
	}
	if v := counterValue(t, h.reg, "rolter_upstream_attempts_total", map[string]string{"provider": "p", "class": "client_cancelled"}); v != runs {
		t.Fatalf("client_cancelled attempts %v, want %d", v, runs)
	}
}

// TestScenario06_SecondRateLimitExtendsNeverShortens: the first part of
// scenario 6 (the key cools >= Retry-After, the retry goes to another key
// at once) is TestRateLimitCoolsKeyAndUsesAnother. Here one key is hit
// again while it cools (panic mode: it is the only key): a shorter
// Retry-After leaves the cooldown's end alone, a longer one extends it.
func TestScenario06_SecondRateLimitExtendsNeverShortens(t *testing.T) {
	h := newHarness(t, Config{})
	var ra atomic.Int64
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Retry-After", strconv.Itoa(int(ra.Load())))
		w.WriteHeader(429)
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{}, "sk-only")
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	key := h.gw.table.Load().providers.At(pid).keys[0]
	send := func(retryAfter int) time.Duration {
		t.Helper()
		ra.Store(int64(retryAfter))
		n := up.count()
		resp := h.post("/v1/chat/completions", `{"model":"m"}`)
		if readAll(t, resp); resp.StatusCode != 429 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if up.count()-n != 1 {
			t.Fatalf("%d upstream calls, want 1", up.count()-n)
		}
		return key.breaker.Until().Sub(h.clock.Now())
	}
	if d := send(3); d != 3*time.Second {
		t.Fatalf("first 429: cools %v, want 3s", d)
	}
	h.clock.Advance(time.Second)
	if d := send(1); d != 2*time.Second {
		t.Fatalf("shorter second 429: %v left, want the original 2s", d)
	}
	if d := send(30); d != 30*time.Second {
		t.Fatalf("longer second 429: %v left, want 30s", d)
	}
	// The target itself is never cooled by a key's 429.
	if st := h.gw.state(targetID{pid, ""}, false).breaker.State(); st != cooldown.StateClosed {
		t.Fatalf("target %s after key 429s", st)
	}
}

// TestScenario08_ExponentialEjectionAndHalfOpenRecovery: ejection after
// the threshold and one probe per cooldown are also in
// TestConsecutiveFailuresEjectAndProbe, panic mode in
// TestPanicModeTriesEarliestCooldown. Here: the cooldown doubles on each
// failed probe (5s, 10s, 20s with the defaults), and a successful probe
// closes the breaker so the target takes traffic again.
func TestScenario08_ExponentialEjectionAndHalfOpenRecovery(t *testing.T) {
	h := newHarness(t, Config{})
	var healthy atomic.Bool
	bad := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if !healthy.Load() {
			w.WriteHeader(503)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	})
	good := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{}`) })
	a := h.provider("flaky", bad.base(), store.ProviderSettings{})
	b := h.provider("good", good.base(), store.ProviderSettings{})
	h.route("m", "round_robin", store.Target{ProviderID: a, Weight: 1}, store.Target{ProviderID: b, Weight: 1})
	send := func(n int) {
		t.Helper()
		for range n {
			resp := h.post("/v1/chat/completions", `{"model":"m"}`)
			if readAll(t, resp); resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	br := h.gw.state(targetID{a, ""}, false).breaker
	send(10)
	if bad.count() != cooldown.DefaultThreshold {
		t.Fatalf("%d requests before ejection, want %d", bad.count(), cooldown.DefaultThreshold)
	}
	want := cooldown.DefaultBase
	for level := range 3 {
		if d := br.Until().Sub(h.clock.Now()); d != want {
			t.Fatalf("level %d: cooling %v, want %v", level, d, want)
		}
		n := bad.count()
		send(4) // cooling: nothing reaches it
		if bad.count() != n {
			t.Fatalf("level %d: a cooling target got %d requests", level, bad.count()-n)
		}
		h.clock.Advance(want)
		send(4) // half-open: exactly one probe, which fails
		if bad.count()-n != 1 {
			t.Fatalf("level %d: %d probes, want 1", level, bad.count()-n)
		}
		want *= 2
	}
	if d := br.Until().Sub(h.clock.Now()); d != want {
		t.Fatalf("after three failed probes: cooling %v, want %v", d, want)
	}
	healthy.Store(true)
	h.clock.Advance(want)
	send(4)
	if st := br.State(); st != cooldown.StateClosed {
		t.Fatalf("after a successful probe: %s", st)
	}
	n := bad.count()
	send(10) // closed again: round robin gives it half
	if bad.count()-n != 5 {
		t.Fatalf("recovered target got %d of 10", bad.count()-n)
	}
	// A later ejection starts again at the base cooldown: the level reset.
	healthy.Store(false)
	send(10)
	if d := br.Until().Sub(h.clock.Now()); d != cooldown.DefaultBase {
		t.Fatalf("re-ejection cools %v, want %v", d, cooldown.DefaultBase)
	}
}

// TestScenario10_LongHealthyStreamIsNotCut: the response-header failover is
// TestFirstByteTimeoutFailsOver. A stream that lasts far longer than both
// the first-byte and the idle timeout, with events flowing, is relayed
// whole: there is no whole-request timeout.
func TestScenario10_LongHealthyStreamIsNotCut(t *testing.T) {
	h := newHarness(t, Config{})
	const n, gap = 20, 40 * time.Millisecond
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		sseHeader(w)
		for range n {
			sseWrite(w, vllmStream[1])
			time.Sleep(gap) // the upstream's pace, not a timing assertion
		}
		sseWrite(w, "data: [DONE]\n\n")
	})
	// Both timeouts are shorter than the stream (n*gap = 800ms) and longer
	// than the gap between events.
	pid := h.provider("p", up.base(), store.ProviderSettings{
		FirstByteTimeout: store.Duration(200 * time.Millisecond), IdleTimeout: store.Duration(200 * time.Millisecond)})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	resp := h.post("/v1/chat/completions", `{"model":"m","stream":true}`)
	events := readEvents(t, resp.Body)
	resp.Body.Close()
	if len(events) != n+1 || events[n] != "data: [DONE]" {
		t.Fatalf("%d events, last %q", len(events), events[len(events)-1])
	}
	if recs := h.usage.all(); recs[0].Status != 200 || recs[0].Class != "" {
		t.Fatalf("usage %+v", recs[0])
	}
}

// TestScenario12_UpstreamGarbageIsSanitized: an upstream 502 whose body is
// an HTML error page or truncated JSON is an upstream failure: failed over
// when possible, otherwise a 502 in the gateway's own shape with none of
// the upstream's bytes.
func TestScenario12_UpstreamGarbageIsSanitized(t *testing.T) {
	const marker = "UPSTREAM-INTERNAL-DETAIL"
	for _, c := range []struct{ name, ctype, body string }{
		{"html", "text/html", "<html><body><h1>502 Bad Gateway</h1><pre>" + marker + "</pre></body></html>"},
		{"invalid json", "application/json", `{"error":{"message":"` + marker},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Config{})
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				w.Header().Set("Content-Type", c.ctype)
				w.Header().Set("X-Upstream-Secret", marker)
				w.WriteHeader(502)
				_, _ = io.WriteString(w, c.body)
			})
			pid := h.provider("p", up.base(), store.ProviderSettings{})
			h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
			resp := h.post("/v1/chat/completions", `{"model":"m"}`)
			body := readAll(t, resp)
			if resp.StatusCode != 502 || !strings.HasPrefix(body, `{"error":{`) || !strings.Contains(body, `"code":"upstream_unavailable"`) ||
				resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d %s body %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			if strings.Contains(body, marker) || strings.Contains(body, "<html") || resp.Header.Get("X-Upstream-Secret") != "" {
				t.Fatalf("upstream bytes echoed: %v %s", resp.Header, body)
			}
			if v := counterValue(t, h.reg, "rolter_upstream_attempts_total", map[string]string{"provider": "p", "class": "server_error"}); v != 1 {
				t.Fatalf("server_error attempts %v", v)
			}
			if recs := h.usage.all(); recs[0].Class != string(ClassServer) || recs[0].Status != 502 {
				t.Fatalf("usage %+v", recs[0])
			}
		})
	}
}

// TestScenario12_SuccessWithHTMLBody: a 2xx non-streamed answer whose body
// is not JSON (a misconfigured base_url pointing at a web UI, a captive
// proxy) should count as an upstream failure too.
func TestScenario12_SuccessWithHTMLBody(t *testing.T) {
	h := newHarness(t, Config{})
	html := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html>login page</html>")
	})
	pid := h.provider("p", html.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	resp := h.post("/v1/chat/completions", `{"model":"m"}`)
	if body := readAll(t, resp); resp.StatusCode != 502 || strings.Contains(body, "login page") {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
}

// countingBody counts what the gateway reads of a request body.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// endless is an unbounded body that costs no memory to send.
type endless struct{ sent, limit int64 }

func (e *endless) Read(p []byte) (int, error) {
	if e.sent >= e.limit {
		return 0, io.EOF
	}
	n := int64(len(p))
	n = min(n, e.limit-e.sent)
	for i := range p[:n] {
		p[i] = 'a'
	}
	e.sent += n
	return int(n), nil
}

// TestScenario13_BodyOverLimit: 413 before any upstream is dialled, and
// the gateway reads no more than the limit of a 100 MB body, whether its
// length is declared or chunked.
func TestScenario13_BodyOverLimit(t *testing.T) {
	const limit, huge = 1 << 20, 100 << 20
	h := newHarness(t, Config{MaxBody: limit})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{}`) })
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	var read atomic.Int64
	// A front that counts what the gateway reads of each body.
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = countingBody{r.Body, &read}
		h.gw.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	for _, declared := range []bool{true, false} {
		read.Store(0)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		body := &endless{limit: huge}
		prefix := strings.NewReader(`{"model":"m","x":"`)
		req, _ := http.NewRequest("POST", front.URL+"/v1/chat/completions", io.MultiReader(prefix, body))
		req.ContentLength = -1
		if declared {
			req.ContentLength = int64(prefix.Len()) + huge
		}
		req.Header.Set("Authorization", "Bearer "+h.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("declared=%v: %v", declared, err)
		}
		got := readAll(t, resp)
		runtime.ReadMemStats(&after)
		if resp.StatusCode != 413 || !strings.Contains(got, `"code":"body_too_large"`) {
			t.Fatalf("declared=%v: status %d body %s", declared, resp.StatusCode, got)
		}
		if n := read.Load(); n > limit+1 {
			t.Fatalf("declared=%v: the gateway read %d bytes of a %d-byte limit", declared, n, limit)
		}
		if declared && read.Load() != 0 {
			t.Fatalf("a declared oversize body was read (%d bytes)", read.Load())
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
			t.Fatalf("declared=%v: %d MiB allocated for a refused 100 MiB body", declared, alloc>>20)
		}
	}
	if up.count() != 0 {
		t.Fatalf("the upstream was called %d times", up.count())
	}
}

// TestScenario14_WeightedSplitWithOneTargetDown: the split over the live
// targets holds within 3 points over 10k requests, every request
// succeeds, and the down target gets nothing: nothing at all when active
// health has marked it down, and no more than the breaker threshold of
// refused dials when only passive health can see it.
func TestScenario14_WeightedSplitWithOneTargetDown(t *testing.T) {
	const n = 10000
	check := func(t *testing.T, h *harness, a, b *engine) {
		t.Helper()
		na, nb := a.count(), b.count()
		for range n {
			resp := h.post("/v1/chat/completions", `{"model":"m"}`)
			if body := readAll(t, resp); resp.StatusCode != 200 {
				t.Fatalf("status %d %s", resp.StatusCode, body)
			}
		}
		hitsA, hitsB := a.count()-na, b.count()-nb
		if hitsA+hitsB != n {
			t.Fatalf("%d+%d served of %d", hitsA, hitsB, n)
		}
		if share := float64(hitsA) / n; share < 0.72 || share > 0.78 {
			t.Fatalf("weights 3:1 split %d/%d (%.3f)", hitsA, hitsB, share)
		}
	}
	setup := func(t *testing.T, h *harness) (a, b *engine, down int64) {
		a, b = newEngine(t, "vllm", 4096, "m"), newEngine(t, "vllm", 4096, "m")
		pa := h.provider("a", a.base(), store.ProviderSettings{})
		pb := h.provider("b", b.base(), store.ProviderSettings{})
		down = h.provider("down", deadURL(t), store.ProviderSettings{})
		h.route("m", "weighted", store.Target{ProviderID: pa, Weight: 3}, store.Target{ProviderID: pb, Weight: 1},
			store.Target{ProviderID: down, Weight: 2})
		return a, b, down
	}
	t.Run("passive", func(t *testing.T) {
		h := newHarness(t, Config{})
		a, b, _ := setup(t, h)
		check(t, h, a, b)
		if v := counterValue(t, h.reg, "rolter_upstream_attempts_total", map[string]string{"provider": "down"}); v > cooldown.DefaultThreshold {
			t.Fatalf("%v attempts on the dead target, want <= %d", v, cooldown.DefaultThreshold)
		}
	})
	t.Run("health down", func(t *testing.T) {
		h := newProbedHarness(t, Config{})
		a, b, _ := setup(t, h)
		h.probe()
		check(t, h, a, b)
		if v := counterValue(t, h.reg, "rolter_upstream_attempts_total", map[string]string{"provider": "down"}); v != 0 {
			t.Fatalf("%v attempts on a target that health marked down", v)
		}
	})
}

// TestScenario27_DataPathDoesNotFollowRedirects: a 302 from an upstream is
// a failed attempt; the location (another port, so Go would resend the
// pool key) is never requested.
func TestScenario27_DataPathDoesNotFollowRedirects(t *testing.T) {
	h := newHarness(t, Config{})
	var hits atomic.Int64
	elsewhere := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		hits.Add(1)
		_, _ = io.WriteString(w, `{}`)
	})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		http.Redirect(w, r, elsewhere.URL+"/v1/chat/completions", http.StatusFound)
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{}, "sk-pool-key")
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest("POST", h.srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	req.Header.Set("Authorization", "Bearer "+h.key)
	resp, err := client.Do(req)
	must(t, err)
	readAll(t, resp)
	if up.count() != 1 || hits.Load() != 0 {
		t.Fatalf("redirect followed: upstream %d, redirect target %d", up.count(), hits.Load())
	}
}
