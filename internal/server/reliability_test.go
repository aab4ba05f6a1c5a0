package server_test

// The fault scenarios of the reliability suite (docs/reliability.md) that
// need the whole server: store outage, secret hygiene, slow clients,
// graceful shutdown.

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/store/storetest"
)

// TestScenario16_StoreOutage: PostgreSQL loses the schema under a running
// server (renamed away, so every query fails). Client requests keep being
// served from the snapshot, admin writes get 503, usage records are
// dropped and counted; when the schema comes back, writes work again with
// no restart.
func TestScenario16_StoreOutage(t *testing.T) {
	spec, dir := storetest.Spec(t, "postgres")
	u, err := url.Parse(spec)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	base := *u
	q := base.Query()
	q.Del("search_path")
	base.RawQuery = q.Encode()
	pg, err := sql.Open("pgx", base.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	exec := func(stmt string) {
		t.Helper()
		if _, err := pg.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}

	const tok = "ra-outage-FAKE-0016-padded"
	// The usage recorder writes when the test ticks it, not every second.
	usageTicks := make(chan time.Time)
	cfg := server.Config{Store: spec, DataDir: dir, Demo: true, AdminToken: secret.New(tok)}
	cfg.Usage.Ticks = usageTicks
	r := start(t, cfg)
	defer r.srv.Shutdown()
	key := keyRe.FindStringSubmatch(r.out.String())[1]
	chat := func() int {
		code, _ := r.call(t, "POST", "/v1/chat/completions", key, `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`)
		return code
	}
	if code := chat(); code != 200 {
		t.Fatalf("before the outage: %d", code)
	}

	exec("ALTER SCHEMA " + schema + " RENAME TO " + schema + "_gone")
	restored := false
	defer func() {
		if !restored { // storetest drops the schema by its name
			exec("ALTER SCHEMA " + schema + "_gone RENAME TO " + schema)
		}
	}()
	const n = 50
	for i := range n {
		if code := chat(); code != 200 {
			t.Fatalf("request %d during the outage: %d", i, code)
		}
	}
	// Memory stays flat: usage that cannot be written is dropped, not
	// queued. The live heap after a GC grows by less than a usage record
	// per request over 3,000 more requests (a leak of records or bodies
	// would add at least that).
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// The test keeps every log line in memory; that is the harness, not
	// the server, so it is subtracted.
	logBytes := func() int64 { return int64(r.logs.Cap()) }
	before, logsBefore := heap(), logBytes()
	const more = 3000
	for i := range more {
		if code := chat(); code != 200 {
			t.Fatalf("request %d during the outage: %d", n+i, code)
		}
	}
	// Let the recorder drop what it holds: tick until every record of the
	// outage is counted as dropped (a loaded machine may leave the
	// recorder behind the requests, holding records still to drop).
	// Each tick is received only once the write the previous one started
	// has returned.
	deadline := time.Now().Add(30 * time.Second)
	for {
		tick(t, usageTicks)
		_, metrics := r.call(t, "GET", "/metrics", "", "")
		if metricValue(metrics, "rolter_usage_dropped_total") >= n+more {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the outage's usage was not all dropped: %v of %d", metricValue(metrics, "rolter_usage_dropped_total"), n+more)
		}
	}
	after := heap()
	growth := int64(after) - int64(before) - (logBytes() - logsBefore)
	t.Logf("live heap during the outage: %d KiB before, %d KiB after %d more requests (%+d B/request); RSS %s",
		before>>10, after>>10, more, growth/more, rss())
	if growth > 128*more {
		t.Fatalf("the heap grew by %d bytes over %d requests during the outage", growth, more)
	}
	code, body := r.call(t, "POST", "/admin/v1/orgs/default/providers", tok, `{"name":"during","kind":"vllm","base_url":"http://10.0.0.9/v1"}`)
	if code != 503 || !strings.Contains(body, `"code":"store_unavailable"`) {
		t.Fatalf("admin write during the outage: %d %s\nlogs: %s", code, body, r.logs.String()[max(0, len(r.logs.String())-1500):])
	}
	// Admin reads come from the store too; the admin token is checked
	// against the snapshot, so the answer is 503, never 401.
	if code, body := r.call(t, "GET", "/admin/v1/orgs/default/providers", tok, ""); code != 503 {
		t.Fatalf("admin read during the outage: %d %s", code, body)
	}
	// The usage of the outage's requests is dropped and counted, not
	// queued without bound (the recorder flushes every second).
	deadline = time.Now().Add(5 * time.Second)
	for {
		_, metrics := r.call(t, "GET", "/metrics", "", "")
		if v := metricValue(metrics, "rolter_usage_dropped_total"); v >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("usage drops not counted: %v", metricValue(metrics, "rolter_usage_dropped_total"))
		}
		time.Sleep(50 * time.Millisecond) // waiting for the recorder's flush, not a timing assertion
	}

	exec("ALTER SCHEMA " + schema + "_gone RENAME TO " + schema)
	restored = true
	code, body = r.call(t, "POST", "/admin/v1/orgs/default/providers", tok, `{"name":"after","kind":"vllm","base_url":"http://10.0.0.9/v1"}`)
	if code != 201 {
		t.Fatalf("admin write after recovery: %d %s", code, body)
	}
	if code := chat(); code != 200 {
		t.Fatalf("after recovery: %d", code)
	}
	if strings.Contains(r.logs.String(), tok) || strings.Contains(r.logs.String(), key) {
		t.Fatal("a secret reached the log during the outage")
	}
}

// tick sends one tick to a recorder or controller driven by the test.
func tick(t *testing.T, ticks chan<- time.Time) {
	t.Helper()
	select {
	case ticks <- time.Now():
	case <-time.After(30 * time.Second):
		t.Fatal("the ticked loop did not take a tick in 30 s")
	}
}

// rss reads the process's resident set size from /proc, for the log.
func rss() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// metricValue sums a metric's samples in a Prometheus text exposition.
func metricValue(text, name string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, name); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "{")) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}

// TestScenario18_SecretHygiene runs a full scenario with fake secrets of
// every kind set (admin token, master key, provider key, virtual keys; the
// fleet has no secrets yet) and scans every log line, response body and
// header, and the metrics for them. The one place a secret may appear is
// the response that mints it.
func TestScenario18_SecretHygiene(t *testing.T) {
	const (
		adminTok    = "ra-hygiene-admin-FAKE-7f3a"
		masterKey   = "9c7525327cd03b2d5ada7c7ca2a76c4086ba49ff5da81752bfbed41d47a1b60e" // 32 random bytes in hex
		providerKey = "sk-provider-hygiene-FAKE-9c1d"
	)
	r := start(t, server.Config{DataDir: t.TempDir(), Demo: true, AdminToken: secret.New(adminTok), MasterKey: secret.New(masterKey)})
	defer r.srv.Shutdown()
	demoBase := "http://" + r.srv.Addr + "/demo/v1"
	var seen []string // every response, headers and body
	do := func(method, path, auth, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+r.srv.Addr+path, strings.NewReader(body))
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var hdr strings.Builder
		_ = resp.Header.Write(&hdr)
		seen = append(seen, path+"\n"+hdr.String()+"\n"+string(b))
		return resp.StatusCode, string(b)
	}
	mustDo := func(want int, method, path, auth, body string) string {
		t.Helper()
		code, out := do(method, path, auth, body)
		if code != want {
			t.Fatalf("%s %s: %d %s", method, path, code, out)
		}
		return out
	}
	mustDo(201, "POST", "/admin/v1/orgs/default/providers", adminTok,
		`{"name":"hyg","kind":"vllm","base_url":"`+demoBase+`","models":["demo-model"],"forward_headers":["X-Demo-*"],"keys":[{"secret":"`+providerKey+`"}]}`)
	mustDo(201, "POST", "/admin/v1/orgs/default/providers", adminTok,
		`{"name":"broken","kind":"vllm","base_url":"`+demoBase+`","forward_headers":["X-Demo-*"],"keys":[{"secret":"`+providerKey+`-2"}]}`)
	mustDo(201, "POST", "/admin/v1/orgs/default/projects/default/routes", adminTok,
		`{"model":"hyg","targets":[{"provider":"hyg","upstream_model":"demo-model"},{"provider":"broken","upstream_model":"demo-model"}]}`)
	minted := mustDo(201, "POST", "/admin/v1/orgs/default/projects/default/keys", adminTok, `{"name":"hygiene"}`)
	seen = seen[:len(seen)-1] // the minting response is where the key is shown, once
	vk := keyRe.FindStringSubmatch("virtual key: " + extract(minted, `"secret":"`))
	if vk == nil {
		t.Fatalf("no key in %s", minted)
	}
	virtualKey := vk[1]
	bannerKey := keyRe.FindStringSubmatch(r.out.String())[1]

	for _, c := range []struct {
		auth, body string
		status     int
		hdr        [2]string
	}{
		{virtualKey, `{"model":"hyg","messages":[{"role":"user","content":"hi"}]}`, 200, [2]string{}},
		{virtualKey, `{"model":"hyg","stream":true,"messages":[{"role":"user","content":"hi"}]}`, 200, [2]string{}},
		{bannerKey, `{"model":"demo","messages":[]}`, 200, [2]string{}},
		// Both targets fail, three times: failed attempts, failovers and
		// cooldowns are logged (issue 20), and scanned below.
		{virtualKey, `{"model":"hyg","messages":[]}`, 502, [2]string{"X-Demo-Status", "503"}},
		{virtualKey, `{"model":"hyg","messages":[]}`, 502, [2]string{"X-Demo-Status", "503"}},
		{virtualKey, `{"model":"hyg","messages":[]}`, 502, [2]string{"X-Demo-Status", "503"}},
		{virtualKey, `{"model":"nope"}`, 404, [2]string{}},
		{virtualKey, `not json`, 400, [2]string{}},
		{virtualKey + "x", `{"model":"hyg"}`, 401, [2]string{}},
		{adminTok, `{"model":"hyg"}`, 401, [2]string{}},
		{providerKey, `{"model":"hyg"}`, 401, [2]string{}},
	} {
		req, _ := http.NewRequest("POST", "http://"+r.srv.Addr+"/v1/chat/completions", strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+c.auth)
		if c.hdr[0] != "" {
			req.Header.Set(c.hdr[0], c.hdr[1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var hdr strings.Builder
		_ = resp.Header.Write(&hdr)
		seen = append(seen, hdr.String()+"\n"+string(b))
		if resp.StatusCode != c.status {
			t.Fatalf("%s: %d %s", c.body, resp.StatusCode, b)
		}
	}
	// Fleet secrets: the fleet key is shown when minted, the host key when
	// the host is created and to the box on /vllm/config; nowhere else.
	fleetKey := extract(mustDo(201, "POST", "/admin/v1/orgs/default/fleet-keys", adminTok, `{"name":"hyg"}`), `"secret":"`)
	seen = seen[:len(seen)-1]
	hostKey := extract(mustDo(201, "POST", "/admin/v1/orgs/default/hosts", adminTok,
		`{"ip":"127.0.0.1","port":9,"model_name":"fleet-hyg","recipe":{"vllm":{"model":"m","source":{"kind":"hf"},"vram_gb":1,"disk_gb":1}}}`), `"api_key":"`)
	seen = seen[:len(seen)-1]
	if !strings.HasPrefix(fleetKey, "rf-") || !strings.HasPrefix(hostKey, "rh-") {
		t.Fatalf("fleet key minted: %v, host key minted: %v", fleetKey != "", hostKey != "")
	}
	if cfg := mustDo(200, "GET", "/vllm/config", fleetKey, ""); !strings.Contains(cfg, hostKey) {
		t.Fatal("the box did not receive its host key")
	}
	seen = seen[:len(seen)-1] // the box's own config is where the host key goes
	mustDo(401, "GET", "/vllm/config", fleetKey+"x", "")
	mustDo(401, "GET", "/vllm/config", hostKey, "")
	mustDo(401, "POST", "/vllm/report", virtualKey, "{}")
	mustDo(200, "POST", "/vllm/report", fleetKey, `{"applied":[{"host_id":1,"revision":"r","error":"launch failed"}]}`)
	for _, p := range []string{"/admin/v1/orgs/default/hosts", "/admin/v1/orgs/default/hosts/1", "/admin/v1/orgs/default/fleet-keys"} {
		mustDo(200, "GET", p, adminTok, "")
	}
	mustDo(200, "POST", "/admin/v1/orgs/default/hosts/1/apply", adminTok, "")
	mustDo(200, "PATCH", "/admin/v1/orgs/default/hosts/1", adminTok, `{"notes":"n"}`)
	mustDo(200, "POST", "/admin/v1/orgs/default/hosts/1/retire", adminTok, "")
	mustDo(204, "DELETE", "/admin/v1/orgs/default/fleet-keys/1", adminTok, "")
	mustDo(401, "GET", "/vllm/config", fleetKey, "")

	mustDo(401, "GET", "/admin/v1/orgs", virtualKey, "")
	mustDo(401, "GET", "/admin/v1/orgs", adminTok+"x", "")
	for _, p := range []string{"/admin/v1/orgs/default/providers", "/admin/v1/orgs/default/providers/hyg",
		"/admin/v1/orgs/default/providers/hyg/keys", "/admin/v1/orgs/default/projects/default/keys",
		"/admin/v1/orgs/default/projects/default/routes", "/admin/v1/orgs/default/usage"} {
		mustDo(200, "GET", p, adminTok, "")
	}
	mustDo(400, "POST", "/admin/v1/orgs/default/providers/hyg/keys", adminTok, `{"secret":"`+providerKey+`","bogus":1}`)
	mustDo(200, "GET", "/metrics", "", "")
	mustDo(200, "GET", "/readyz", "", "")

	logs := r.logs.String()
	if !strings.Contains(logs, "/v1/chat/completions") {
		t.Fatalf("the scan saw no request logs: %.500s", logs)
	}
	for _, msg := range []string{"upstream attempt failed", "failing over to another target", "cooldown began"} {
		if !strings.Contains(logs, `msg="`+msg+`"`) {
			t.Errorf("the scan saw no %q line", msg)
		}
	}
	for name, s := range map[string]string{"admin token": adminTok, "master key": masterKey, "provider key": providerKey,
		"virtual key": virtualKey, "banner key": bannerKey, "fleet key": fleetKey, "host key": hostKey} {
		if strings.Contains(logs, s) {
			t.Errorf("%s in the logs", name)
		}
		for _, out := range seen {
			if strings.Contains(out, s) {
				t.Errorf("%s in a response: %.300s", name, out)
			}
		}
	}
}

// extract returns the JSON string value that follows prefix in s.
func extract(s, prefix string) string {
	_, rest, ok := strings.Cut(s, prefix)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// TestScenario19_SlowLorisAndHugeHeaders: clients that dribble their
// headers are cut at the read-header timeout and do not slow anyone else;
// a header block over the limit gets 431.
func TestScenario19_SlowLorisAndHugeHeaders(t *testing.T) {
	const timeout = 500 * time.Millisecond
	r := start(t, server.Config{DataDir: t.TempDir(), Demo: true, ReadHeaderTimeout: timeout})
	defer r.srv.Shutdown()
	key := keyRe.FindStringSubmatch(r.out.String())[1]

	const lorises = 50
	var wg sync.WaitGroup
	cut := make(chan time.Duration, lorises)
	stop := make(chan struct{})
	for range lorises {
		conn, err := net.Dial("tcp", r.srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer conn.Close()
			began := time.Now()
			req := "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 1000)
			go func() { // the server closing the connection is what we wait for
				_, _ = io.Copy(io.Discard, conn)
				cut <- time.Since(began)
			}()
			for i := 0; i < len(req); i++ {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if _, err := conn.Write([]byte{req[i]}); err != nil {
					return
				}
			}
		}()
	}
	// Meanwhile other clients are served at once.
	for range 20 {
		began := time.Now()
		code, body := r.call(t, "POST", "/v1/chat/completions", key, `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`)
		if code != 200 {
			t.Fatalf("a client behind the slow ones: %d %s", code, body)
		}
		if d := time.Since(began); d > timeout/2 {
			t.Fatalf("a client behind the slow ones waited %v", d)
		}
	}
	for range lorises {
		select {
		case d := <-cut:
			if d > timeout*3 {
				t.Fatalf("a slow client held its connection %v (read-header timeout %v)", d, timeout)
			}
		case <-time.After(10 * timeout):
			t.Fatal("a slow client was never cut")
		}
	}
	close(stop)
	wg.Wait()

	// A 1 MB header block.
	req, _ := http.NewRequest("GET", "http://"+r.srv.Addr+"/healthz", nil)
	req.Header.Set("X-Huge", strings.Repeat("h", 1<<20))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatalf("huge header: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("huge header: %d", resp.StatusCode)
	}
	// Just under the limit is fine.
	req.Header.Set("X-Huge", strings.Repeat("h", server.MaxHeaderBytes-1024))
	if code, _ := func() (int, error) {
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}(); code != 200 {
		t.Fatalf("header under the limit: %d", code)
	}
}

// TestScenario20_ShutdownDuring100Streams: with 100 streams in flight,
// cancelling Run stops new connections at once, lets every stream finish
// (or end with a clean error event) before the drain deadline, and Run
// returns nil (exit code 0).
func TestScenario20_ShutdownDuring100Streams(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- server.Run(ctx, server.Config{Listen: addr, DataDir: t.TempDir(), Demo: true, Out: out, ShutdownTimeout: 10 * time.Second},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		time.Sleep(5 * time.Millisecond) // waiting for start-up, not a timing assertion
	}
	http.DefaultClient.CloseIdleConnections()
	key := keyRe.FindStringSubmatch(out.String())[1]

	const streams = 100
	tr := &http.Transport{MaxIdleConnsPerHost: streams}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	started := make(chan struct{}, streams)
	ends := make(chan string, streams)
	for range streams {
		go func() {
			req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions",
				strings.NewReader(`{"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("X-Demo-Chunks", "10")
			req.Header.Set("X-Demo-Chunk-Delay-Ms", "50")
			resp, err := client.Do(req)
			if err != nil {
				started <- struct{}{}
				ends <- "request failed: " + err.Error()
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			first, err := br.ReadString('\n')
			started <- struct{}{}
			if err != nil {
				ends <- "no first event: " + err.Error()
				return
			}
			rest, err := io.ReadAll(br)
			body := first + string(rest)
			switch {
			case err != nil:
				ends <- "stream cut: " + err.Error()
			case strings.HasSuffix(body, "data: [DONE]\n\n"):
				ends <- "done"
			case strings.Contains(body, `data: {"error":`):
				ends <- "error event"
			default:
				ends <- "ended without [DONE] or an error: " + body[max(0, len(body)-200):]
			}
		}()
	}
	for range streams {
		<-started
	}
	began := time.Now()
	cancel()
	// New connections are refused while the streams drain.
	refused := false
	for time.Since(began) < 2*time.Second {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			refused = true
			break
		}
		c.Close()
		time.Sleep(5 * time.Millisecond) // polling for the listener to close, not a timing assertion
	}
	if !refused {
		t.Fatal("still accepting connections after shutdown began")
	}
	finished := 0
	for range streams {
		switch e := <-ends; e {
		case "done":
			finished++
		case "error event":
		default:
			t.Errorf("stream: %s", e)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("drain took %v, past the deadline", d)
	}
	if finished == 0 {
		t.Fatal("no stream finished")
	}
}
