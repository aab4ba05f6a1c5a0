package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

const limitsAdmin = "ra-limits-test-admin-token-0000000001"

// usageUpstream is an OpenAI-compatible upstream whose every answer
// reports 10 prompt and 20 completion tokens.
func usageUpstream(t *testing.T) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		// An upstream's own limits must not reach the caller.
		w.Header().Set("X-Ratelimit-Remaining-Requests", "99999")
		_, _ = io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}`)
	}))
	t.Cleanup(up.Close)
	return up
}

// limitsEnv is a running gateway with provider "up" (also in group "grp")
// and route "r" on it.
type limitsEnv struct {
	*run
	t *testing.T
}

func startLimits(t *testing.T, cfg server.Config, upstream string, setup bool) *limitsEnv {
	t.Helper()
	cfg.AdminToken = secret.New(limitsAdmin)
	e := &limitsEnv{run: start(t, cfg), t: t}
	t.Cleanup(func() { _ = e.srv.Shutdown() })
	if setup {
		e.setup(upstream)
	}
	return e
}

// setup creates provider "up" on upstream, group "grp" over it and route
// "r" to its model "m".
func (e *limitsEnv) setup(upstream string) {
	e.t.Helper()
	e.admin(201, "POST", "/orgs/default/providers", `{"name":"up","kind":"openai","base_url":"`+upstream+`","keys":[{"secret":"sk-up"}]}`)
	e.admin(201, "POST", "/orgs/default/groups", `{"name":"grp","members":[{"provider":"up"}]}`)
	e.admin(201, "POST", "/orgs/default/projects/default/routes", `{"model":"r","targets":[{"provider":"up","upstream_model":"m"}]}`)
}

func (e *limitsEnv) admin(want int, method, path, body string) map[string]any {
	e.t.Helper()
	code, out := e.call(e.t, method, "/admin/v1"+path, limitsAdmin, body)
	if code != want {
		e.t.Fatalf("%s %s: %d %s", method, path, code, out)
	}
	m := map[string]any{}
	_ = json.Unmarshal([]byte(out), &m)
	return m
}

// key creates a virtual key in project with the given JSON fields.
func (e *limitsEnv) key(project, fields string) string {
	e.t.Helper()
	name := fmt.Sprintf("k%d", rand.Uint32())
	m := e.admin(201, "POST", "/orgs/default/projects/"+project+"/keys", `{"name":"`+name+`"`+fields+`}`)
	return m["secret"].(string)
}

type answer struct {
	status int
	h      http.Header
	body   string
}

func (e *limitsEnv) send(path, key, body string) answer {
	e.t.Helper()
	req, _ := http.NewRequest("POST", "http://"+e.addr+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func chat(model string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hello there"}]}`
}

// TestRateLimitRPMEveryAddress: a key with rpm_limit 1 gets its first
// request with the rate limit headers and a 429 rate_limited for the
// second, whatever the address kind.
func TestRateLimitRPMEveryAddress(t *testing.T) {
	spec, dir := storetest.Spec(t, "sqlite")
	e := startLimits(t, server.Config{Store: spec, DataDir: dir}, usageUpstream(t).URL+"/v1", true)
	for _, model := range []string{"r", "up/m", "grp/m"} {
		key := e.key("default", `,"rpm_limit":1`)
		a := e.send("/v1/chat/completions", key, chat(model))
		if a.status != 200 {
			t.Fatalf("%s: first request %d %s", model, a.status, a.body)
		}
		if a.h.Get("X-Ratelimit-Limit-Requests") != "1" || a.h.Get("X-Ratelimit-Remaining-Requests") != "0" ||
			a.h.Get("X-Ratelimit-Reset-Requests") != "1m0s" || a.h.Get("X-Ratelimit-Limit-Tokens") != "" {
			t.Fatalf("%s: success headers %v", model, a.h)
		}
		a = e.send("/v1/chat/completions", key, chat(model))
		var body struct {
			Error struct{ Code, Type, Message string }
		}
		_ = json.Unmarshal([]byte(a.body), &body)
		if a.status != 429 || body.Error.Code != "rate_limited" || body.Error.Type != "rate_limit_error" ||
			!strings.Contains(body.Error.Message, "1 requests per minute") {
			t.Fatalf("%s: second request %d %s", model, a.status, a.body)
		}
		// Up to a minute after the first request, however long the two
		// requests took on a loaded machine.
		if ra, err := strconv.Atoi(a.h.Get("Retry-After")); err != nil || ra < 30 || ra > 60 {
			t.Fatalf("%s: Retry-After %q", model, a.h.Get("Retry-After"))
		}
		if a.h.Get("X-Ratelimit-Limit-Requests") != "1" || a.h.Get("X-Ratelimit-Remaining-Requests") != "0" ||
			a.h.Get("X-Ratelimit-Reset-Requests") == "" {
			t.Fatalf("%s: 429 headers %v", model, a.h)
		}
	}
	// Unlimited keys get no rate limit headers, and never the upstream's.
	if a := e.send("/v1/chat/completions", e.key("default", ""), chat("r")); a.status != 200 || a.h.Get("X-Ratelimit-Remaining-Requests") != "" {
		t.Fatalf("unlimited key: %d %v", a.status, a.h)
	}
}

// TestRateLimitProjectAndRoute: a project's limit counts all its keys
// together; a route's counts every caller of the route, and only requests
// that address the route.
func TestRateLimitProjectAndRoute(t *testing.T) {
	spec, dir := storetest.Spec(t, "sqlite")
	up := usageUpstream(t)
	e := startLimits(t, server.Config{Store: spec, DataDir: dir}, up.URL+"/v1", true)
	e.admin(201, "POST", "/orgs/default/projects", `{"name":"team","rpm_limit":2}`)
	e.admin(201, "POST", "/orgs/default/projects/team/routes", `{"model":"r","targets":[{"provider":"up","upstream_model":"m"}]}`)
	a, b := e.key("team", ""), e.key("team", "")
	if s := e.send("/v1/chat/completions", a, chat("r")).status; s != 200 {
		t.Fatalf("team 1: %d", s)
	}
	if x := e.send("/v1/chat/completions", b, chat("up/m")); x.status != 200 || x.h.Get("X-Ratelimit-Remaining-Requests") != "0" {
		t.Fatalf("team 2: %d %v", x.status, x.h)
	}
	x := e.send("/v1/chat/completions", b, chat("grp/m"))
	if x.status != 429 || !strings.Contains(x.body, `project \"team\"`) {
		t.Fatalf("team 3: %d %s", x.status, x.body)
	}

	e.admin(200, "PATCH", "/orgs/default/projects/default/routes/r", `{"rpm_limit":1}`)
	c, d := e.key("default", ""), e.key("default", "")
	if s := e.send("/v1/chat/completions", c, chat("r")).status; s != 200 {
		t.Fatalf("route 1: %d", s)
	}
	x = e.send("/v1/chat/completions", d, chat("r"))
	if x.status != 429 || !strings.Contains(x.body, `route \"r\"`) {
		t.Fatalf("route 2 from another key: %d %s", x.status, x.body)
	}
	if x = e.send("/v1/chat/completions", d, chat("up/m")); x.status != 200 {
		t.Fatalf("the provider address is not the route: %d %s", x.status, x.body)
	}
	// The route limit is per route: team's "r" is another route.
	if x = e.send("/v1/chat/completions", e.key("team", ""), chat("r")); x.status != 429 || !strings.Contains(x.body, "project") {
		t.Fatalf("team's r: %d %s", x.status, x.body)
	}
}

// usageCount is the number of usage records the store holds: a request's
// record is written after its token correction.
func (e *limitsEnv) waitUsage(n int) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := e.admin(200, "GET", "/orgs/default/usage?limit=500", "")
		if d, _ := m["data"].([]any); len(d) >= n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("fewer than %d usage records after 30s: %v", n, m)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRateLimitTokens: a request is admitted on its estimate (prompt
// lower bound plus max tokens), corrected to the usage the upstream
// reports, and one that cannot fit in a minute is refused for good.
func TestRateLimitTokens(t *testing.T) {
	spec, dir := storetest.Spec(t, "sqlite")
	e := startLimits(t, server.Config{Store: spec, DataDir: dir}, usageUpstream(t).URL+"/v1", true)
	key := e.key("default", `,"tpm_limit":100`)
	req := `{"model":"up/m","max_tokens":60,"messages":[{"role":"user","content":"hello there"}]}`
	a := e.send("/v1/chat/completions", key, req)
	// Estimate: 2 visible fields + 1 for the prompt's template + 60 = 63 at most.
	if a.status != 200 || a.h.Get("X-Ratelimit-Limit-Tokens") != "100" {
		t.Fatalf("first: %d %v %s", a.status, a.h, a.body)
	}
	if rem, _ := strconv.Atoi(a.h.Get("X-Ratelimit-Remaining-Tokens")); rem < 37 || rem > 40 {
		t.Fatalf("remaining after the estimate = %q", a.h.Get("X-Ratelimit-Remaining-Tokens"))
	}
	e.waitUsage(1)
	// Corrected to 30 used: 70 left, room for another estimate of ~62
	// (without the correction, 37 would not be).
	a = e.send("/v1/chat/completions", key, req)
	if a.status != 200 {
		t.Fatalf("second, after the correction: %d %s", a.status, a.body)
	}
	e.waitUsage(2)
	a = e.send("/v1/chat/completions", key, `{"model":"up/m","max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`)
	if a.status != 429 || !strings.Contains(a.body, "lower max_tokens") || a.h.Get("Retry-After") != "" {
		t.Fatalf("too large: %d %v %s", a.status, a.h, a.body)
	}
	if rem, _ := strconv.Atoi(a.h.Get("X-Ratelimit-Remaining-Tokens")); rem < 40 {
		t.Fatalf("remaining after two corrected requests = %q, want about 40", a.h.Get("X-Ratelimit-Remaining-Tokens"))
	}
}

// TestRateLimitAnthropicSurface: /v1/messages answers with Anthropic's
// header names and error type.
func TestRateLimitAnthropicSurface(t *testing.T) {
	spec, dir := storetest.Spec(t, "sqlite")
	e := startLimits(t, server.Config{Store: spec, DataDir: dir}, usageUpstream(t).URL+"/v1", true)
	key := e.key("default", `,"rpm_limit":1,"tpm_limit":1000`)
	msg := `{"model":"r","max_tokens":50,"messages":[{"role":"user","content":"hello"}]}`
	a := e.send("/v1/messages", key, msg)
	if a.status != 200 {
		t.Fatalf("first: %d %s", a.status, a.body)
	}
	reset, err := time.Parse(time.RFC3339, a.h.Get("Anthropic-Ratelimit-Requests-Reset"))
	if a.h.Get("Anthropic-Ratelimit-Requests-Limit") != "1" || a.h.Get("Anthropic-Ratelimit-Requests-Remaining") != "0" ||
		err != nil || reset.Before(time.Now().Add(50*time.Second)) || a.h.Get("Anthropic-Ratelimit-Tokens-Limit") != "1000" ||
		a.h.Get("Anthropic-Ratelimit-Tokens-Remaining") == "" || a.h.Get("Anthropic-Ratelimit-Tokens-Reset") == "" ||
		a.h.Get("X-Ratelimit-Limit-Requests") != "" {
		t.Fatalf("success headers: %v", a.h)
	}
	a = e.send("/v1/messages", key, msg)
	var body struct {
		Type  string
		Error struct{ Type, Message string }
	}
	_ = json.Unmarshal([]byte(a.body), &body)
	if a.status != 429 || body.Type != "error" || body.Error.Type != "rate_limit_error" || a.h.Get("Retry-After") == "" ||
		a.h.Get("Anthropic-Ratelimit-Requests-Remaining") != "0" {
		t.Fatalf("second: %d %v %s", a.status, a.h, a.body)
	}
}

// TestRateLimitThreeReplicas: three gateway processes on one PostgreSQL
// share a key's limit through Redis: offered 1,000 requests/s in total,
// they admit within 5% of what the limit allows.
//
// The replicas are separate OS processes (startReplica), so what they
// share is what `rolter serve` replicas share: PostgreSQL and Redis. The
// test measures sharing, not the fallback (TestRateLimitRedisOutage): on
// a loaded test machine a check can wait for a CPU longer than the 50ms
// default, so the Redis timeout is 2s here.
func TestRateLimitThreeReplicas(t *testing.T) {
	addr := testkit.RedisAddr(t)
	prefix := testkit.RedisPrefix(t, addr)
	spec, _ := storetest.Spec(t, "postgres")
	up := usageUpstream(t)
	var gws []*limitsEnv
	for range 3 {
		gws = append(gws, startReplica(t, replicaConfig{Store: spec, DataDir: t.TempDir(), Redis: "redis://" + addr, RedisPrefix: prefix, RedisTimeout: 2 * time.Second}))
	}
	gws[0].setup(up.URL + "/v1")
	const limit = 3000 // per minute: a burst of 3,000, then 50/s
	key := gws[0].key("default", fmt.Sprintf(`,"rpm_limit":%d`, limit))
	// Every replica knows the key (LISTEN/NOTIFY) before the run.
	for _, g := range gws {
		g.waitKnows(key)
	}

	const rate, seconds = 1000, 6
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 200}}
	defer client.CloseIdleConnections()
	var ok, limited, other atomic.Int64
	sem := make(chan struct{}, 256)
	var wg sync.WaitGroup
	body := chat("r")
	start := time.Now()
	sent := 0
	for sent < rate*seconds {
		due := int(time.Since(start).Seconds() * rate)
		if due <= sent {
			time.Sleep(time.Millisecond) // pacing the offered load
			continue
		}
		for ; sent < due && sent < rate*seconds; sent++ {
			sem <- struct{}{}
			wg.Add(1)
			go func(g *limitsEnv) {
				defer func() { <-sem; wg.Done() }()
				req, _ := http.NewRequest("POST", "http://"+g.addr+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := client.Do(req)
				if err != nil {
					other.Add(1)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					ok.Add(1)
				case 429:
					limited.Add(1)
				default:
					other.Add(1)
				}
			}(gws[sent%3])
		}
	}
	elapsed := time.Since(start)
	wg.Wait()
	expected := limit + elapsed.Seconds()*limit/60
	accuracy := (float64(ok.Load()) - expected) / expected
	t.Logf("offered %d requests in %v (%.0f/s) to 3 replicas: %d admitted, %d refused, %d other; the limit allows %.0f; admitted is %+.2f%% off",
		sent, elapsed.Round(time.Millisecond), float64(sent)/elapsed.Seconds(), ok.Load(), limited.Load(), other.Load(), expected, 100*accuracy)
	for _, g := range gws {
		_, m := g.call(t, "GET", "/metrics", "", "")
		t.Logf("replica %s: %s", g.addr, strings.ReplaceAll(grepLines(m, "rolter_ratelimit_"), "\n", "; "))
	}
	if other.Load() != 0 {
		t.Fatalf("%d requests neither admitted nor refused", other.Load())
	}
	if accuracy > 0.05 || accuracy < -0.05 {
		t.Fatalf("admitted %d, %.2f%% off the %.0f the limit allows", ok.Load(), 100*accuracy, expected)
	}
}

// cutProxy forwards TCP to target until cut, which closes the listener
// and every connection: Redis becomes unreachable; or until stall, after
// which Redis is reachable but never answers.
type cutProxy struct {
	ln      net.Listener
	stalled atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.stalled.Load() {
				p.mu.Lock()
				p.conns = append(p.conns, c)
				p.mu.Unlock()
				go func() { _, _ = io.Copy(io.Discard, c) }()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
	t.Cleanup(p.cut)
	return p
}

func (p *cutProxy) cut() {
	p.ln.Close()
	p.closeConns()
}

// stall closes every connection; the next ones are accepted, and what
// they send is read and never answered.
func (p *cutProxy) stall() {
	p.stalled.Store(true)
	p.closeConns()
}

func (p *cutProxy) closeConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestRateLimitRedisOutage: when Redis goes away mid-run, requests keep
// being served and limited, by this replica's counters; the outage is
// logged once and shown on /metrics.
func TestRateLimitRedisOutage(t *testing.T) {
	addr := testkit.RedisAddr(t)
	prefix := testkit.RedisPrefix(t, addr)
	p := newCutProxy(t, addr)
	spec, dir := storetest.Spec(t, "sqlite")
	// A generous check timeout: on a loaded machine a 50 ms one can expire
	// before the cut, and the requests before it are then counted locally.
	// The cut refuses connections, so the outage is seen at once anyway.
	e := startLimits(t, server.Config{Store: spec, DataDir: dir, Redis: "redis://" + p.ln.Addr().String(), RedisPrefix: prefix,
		RedisTimeout: 2 * time.Second},
		usageUpstream(t).URL+"/v1", true)
	key := e.key("default", `,"rpm_limit":20`)
	for i := range 5 {
		if a := e.send("/v1/chat/completions", key, chat("r")); a.status != 200 {
			t.Fatalf("request %d before the outage: %d %s", i, a.status, a.body)
		}
	}
	p.cut()
	var slowest time.Duration
	statuses := map[int]int{}
	for range 30 {
		start := time.Now()
		a := e.send("/v1/chat/completions", key, chat("r"))
		slowest = max(slowest, time.Since(start))
		statuses[a.status]++
	}
	t.Logf("during the outage: statuses %v, slowest request %v", statuses, slowest)
	// Local counters start full: 20 admitted, then refused.
	if statuses[200] != 20 || statuses[429] != 10 {
		t.Fatalf("during the outage: %v", statuses)
	}
	if slowest > 5*time.Second {
		t.Fatalf("a request stalled %v", slowest)
	}
	if n := strings.Count(e.logs.String(), "Redis is unavailable"); n != 1 {
		t.Fatalf("outage logged %d times", n)
	}
	_, metrics := e.call(t, "GET", "/metrics", "", "")
	if !strings.Contains(metrics, "rolter_ratelimit_redis_fallback 1") || !strings.Contains(metrics, "rolter_ratelimit_fallback_checks_total 30") &&
		!strings.Contains(metrics, "rolter_ratelimit_fallback_checks_total 29") {
		t.Fatalf("metrics: %s", grepLines(metrics, "rolter_ratelimit"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
