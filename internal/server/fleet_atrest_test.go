package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/store/storetest"
	"github.com/rolter/rolter/internal/testkit"
)

// boxesEnv, in a child of the test binary, runs fake fleet boxes instead of
// the tests (boxesMain): the gateway's goroutines and descriptors are then
// the test process's alone.
const boxesEnv = "ROLTER_TEST_FAKE_BOXES"

// boxIP is the loopback address of fake box i: each box has its own, as
// a fleet's boxes do, so each is one host at one address.
func boxIP(i int) string { return fmt.Sprintf("127.0.%d.%d", 1+i/200, 10+i%200) }

// boxesMain serves N fake vLLM boxes (GET /health, GET /v1/models), each
// on its own loopback address, and prints "box I PORT" for each. Then it
// reads commands from stdin: "poll ADDR KEY" starts one agent per box that
// fetches /vllm/config from the box's address every 500ms over a kept-alive
// connection, as the real agent does, printing "polled I" after each box's
// first answer that lists a host. It exits when stdin closes.
func boxesMain() int {
	n, err := strconv.Atoi(os.Getenv(boxesEnv))
	if err != nil || n <= 0 || n > 1000 {
		fmt.Fprintln(os.Stderr, "bad box count")
		return 2
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Printf(format+"\n", args...)
		out.Unlock()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","max_model_len":32768}]}`)
	})
	for i := range n {
		ln, err := net.Listen("tcp", boxIP(i)+":0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() { _ = http.Serve(ln, mux) }()
		say("box %d %d", i, ln.Addr().(*net.TCPAddr).Port)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) != 3 || f[0] != "poll" {
			continue
		}
		for i := range n {
			go poll(i, f[1], f[2], say)
		}
	}
	return 0
}

// poll is box i's agent: GET /vllm/config every 500ms from the box's
// address, then POST /vllm/report of what it fetched, as the real agent
// does after every fetch.
func poll(i int, addr, key string, say func(string, ...any)) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(boxIP(i))}}
	c := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 1}, Timeout: 10 * time.Second}
	said := false
	for {
		req, _ := http.NewRequest("GET", "http://"+addr+"/vllm/config", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		if resp, err := c.Do(req); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !said && resp.StatusCode == 200 && strings.Contains(string(body), `"host_id"`) {
				say("polled %d", i)
				said = true
			}
			var cfg fleetapi.Config
			if json.Unmarshal(body, &cfg) == nil {
				rep := fleetapi.Report{Discovered: fleetapi.Discovered{GPU: "1x test", GPUCount: 1, VRAMGB: 80}}
				for _, a := range cfg.Assignments {
					rep.Applied = append(rep.Applied, fleetapi.Applied{HostID: a.HostID, Revision: a.Revision})
				}
				rb, _ := json.Marshal(rep)
				req, _ := http.NewRequest("POST", "http://"+addr+"/vllm/report", bytes.NewReader(rb))
				req.Header.Set("Authorization", "Bearer "+key)
				if resp, err := c.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(es)
}

// TestFleetAtRestCostPerHost (issue 23 §2): with 50 fake boxes registered,
// probed, polling /vllm/config and reporting, the gateway at rest holds
// at most about one descriptor, two goroutines and 32 KiB of heap and
// stacks per host: one prober per host, no probe connection kept between
// sweeps, no goroutine per host waiting to probe, and no box connection
// kept between cycles (the report closes it). (Before, the readiness
// cache and the controller each held an idle connection and the cache a
// goroutine per host: 3 and 6.) The boxes run in a child process, so what
// is counted is the gateway's.
func TestFleetAtRestCostPerHost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 50 fake boxes")
	}
	if _, err := net.Listen("tcp", boxIP(1)+":0"); err != nil {
		t.Skipf("loopback addresses beyond 127.0.0.1 are not available: %v", err)
	}
	const n = 50
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), boxesEnv+"="+strconv.Itoa(n))
	stdin, err := cmd.StdinPipe()
	noErr(t, err)
	stdout, err := cmd.StdoutPipe()
	noErr(t, err)
	cmd.Stderr = os.Stderr
	noErr(t, cmd.Start())
	t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	ports := make([]int, n)
	for i := range n {
		if !lines.Scan() {
			t.Fatalf("the boxes stopped after %d: %v", i, lines.Err())
		}
		var j, p int
		if _, err := fmt.Sscanf(lines.Text(), "box %d %d", &j, &p); err != nil || j != i {
			t.Fatalf("box line %q: %v", lines.Text(), err)
		}
		ports[i] = p
	}
	var mu sync.Mutex
	polled := map[int]bool{}
	go func() { // ends when the child's stdout closes, at cleanup
		for lines.Scan() {
			var i int
			if _, err := fmt.Sscanf(lines.Text(), "polled %d", &i); err == nil {
				mu.Lock()
				polled[i] = true
				mu.Unlock()
			}
		}
	}()

	spec, dir := storetest.Spec(t, "sqlite")
	cfg := fleetConfig(spec, dir)
	sweeps := make(chan time.Time)
	cfg.Fleet.Controller.Interval = time.Hour // swept by the test only
	cfg.Fleet.Controller.Ticks = sweeps
	cfg.Metadata.Interval = 30 * time.Second
	r := start(t, cfg)
	defer r.srv.Shutdown()
	const tok = "tok-FLEET-FAKE-0123456789"
	code, body := r.call(t, "POST", "/admin/v1/orgs/default/fleet-keys", tok, `{"name":"boxes"}`)
	if code != 201 {
		t.Fatalf("fleet key: %d %s", code, body)
	}
	fkey := decodeJSON[struct{ Secret string }](t, body).Secret
	sweep := func() { sweeps <- time.Now() }
	sweep()

	runtime.GC()
	baseG, baseFD := runtime.NumGoroutine(), openFDs(t)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseMem := ms.HeapAlloc + ms.StackInuse

	ids := make([]int64, n)
	for i := range n {
		code, body := r.call(t, "POST", "/admin/v1/orgs/default/hosts", tok, fmt.Sprintf(
			`{"ip":%q,"port":%d,"model_name":"qwen3","recipe":`+recipeJSON+`}`, boxIP(i), ports[i], ""))
		if code != 201 {
			t.Fatalf("create host %d: %d %s", i, code, body)
		}
		ids[i] = decodeJSON[hostJSON](t, body).ID
	}
	_, err = fmt.Fprintf(stdin, "poll %s %s\n", r.addr, fkey)
	noErr(t, err)
	testkit.Eventually(t, "every host serving and every box polling", func() bool {
		sweep()
		for _, id := range ids {
			if r.host(t, tok, id).State != "serving" {
				return false
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return len(polled) == n
	})
	// Two more sweeps: the readiness cache now has every provider's
	// reading from the controller.
	sweep()
	sweep()

	var g, fds int
	var mem int64
	// At rest, goroutines, descriptors and memory all stay within their
	// bounds; on a loaded machine a sweep's stragglers or garbage not yet
	// collected can lift one reading, so the bounds must hold together at
	// one moment within the deadline, not at the first look.
	testkit.Eventually(t, "the gateway at rest: ≤ 2 goroutines, ≤ 1 descriptor and ≤ 32 KiB per host", func() bool {
		runtime.GC()
		g, fds = runtime.NumGoroutine()-baseG, openFDs(t)-baseFD
		runtime.ReadMemStats(&ms)
		mem = int64(ms.HeapAlloc+ms.StackInuse) - int64(baseMem)
		// Generous fixed slack for what is not per host (a request in
		// flight, a sweep's stragglers, the store's connections).
		return g <= 2*n+20 && fds <= n+10 && mem <= 32<<10*int64(n)
	})
	t.Logf("at rest with %d hosts: %+.2f goroutines, %+.2f descriptors, %+.1f KiB heap and stacks per host",
		n, float64(g)/n, float64(fds)/n, float64(mem)/n/1024)
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
