package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// gatewayProc is a `rolter serve` child configured to route "bench" to the
// mock.
type gatewayProc struct {
	*child
	url     string // http://host:port
	key     string // a virtual key allowed to call "bench"
	admin   string // the admin token
	dataDir string
	routes  int // routes in its catalog, "bench" included

	seedTime  time.Duration // writing the filler catalog
	readyTime time.Duration // process start to /readyz 200: store open and first snapshot
	// createRoute is the round trip of the admin write that created the
	// bench route: the write, then the snapshot and the gateway's table
	// brought up to date before the answer.
	createRoute time.Duration
}

// startGateway seeds a store with a catalog of routes routes, starts
// `rolter serve` on it and registers the mock at mockURL as provider
// "bench-mock" with route "bench" through the admin API; with a pool of
// more than one target, the route and its providers are seeded instead
// (seedPool). extra are more `rolter serve` flags.
func startGateway(ctx context.Context, exe, mockURL string, routes, pool int, keyFields map[string]any, extra ...string) (*gatewayProc, error) {
	return startGatewayEnv(ctx, nil, exe, mockURL, routes, pool, keyFields, extra...)
}

// startGatewayEnv is startGateway with env added to the child's
// environment.
func startGatewayEnv(ctx context.Context, env []string, exe, mockURL string, routes, pool int, keyFields map[string]any, extra ...string) (*gatewayProc, error) {
	dir, err := os.MkdirTemp("", "rolter-bench-")
	if err != nil {
		return nil, err
	}
	g := &gatewayProc{dataDir: dir, routes: routes}
	ok := false
	defer func() {
		if !ok {
			g.stop()
		}
	}()
	t0 := time.Now()
	if err := seed(ctx, dir, mockURL+"/v1", routes); err != nil {
		return nil, fmt.Errorf("seed %d routes: %w", routes, err)
	}
	if pool > 1 {
		if err := seedPool(ctx, dir, mockURL+"/v1", pool); err != nil {
			return nil, fmt.Errorf("seed a pool of %d: %w", pool, err)
		}
	}
	g.seedTime = time.Since(t0)

	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	g.admin = "ra-bench-" + hex.EncodeToString(tok)
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	g.url = "http://" + addr
	t0 = time.Now()
	// The first-start banner on stdout holds secrets the bench does not
	// need (it makes its own key below), so stdout is discarded.
	g.child, err = startChild(fmt.Sprintf("gateway (%d routes)", routes), exe, append([]string{"serve",
		"--listen", addr, "--data-dir", dir, "--log-level", "error", "--shutdown-timeout", "2s"}, extra...),
		childEnv(append([]string{"ROLTER_ADMIN_TOKEN=" + g.admin}, env...)...), nil)
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, g.child, g.url+"/readyz", 5*time.Minute); err != nil {
		return nil, err
	}
	g.readyTime = time.Since(t0)

	base := "/admin/v1/orgs/" + orgName
	if pool <= 1 { // else seedPool wrote the route
		if _, err := g.adminCall(ctx, http.MethodPost, base+"/providers", map[string]any{
			"name": "bench mock", "slug": mockSlug, "kind": store.KindVLLM, "base_url": mockURL + "/v1",
			"forward_headers": []string{"X-Demo-*"}}, nil); err != nil { // the mock is shaped by x-demo-* headers
			return nil, err
		}
		if g.createRoute, err = g.adminCall(ctx, http.MethodPost, base+"/projects/"+projectName+"/routes", map[string]any{
			"model": benchRoute, "targets": []map[string]any{{"provider": mockSlug, "upstream_model": upstreamName}}}, nil); err != nil {
			return nil, err
		}
	}
	var key struct{ Secret string }
	if _, err := g.adminCall(ctx, http.MethodPost, base+"/projects/"+projectName+"/keys", keyFields, &key); err != nil {
		return nil, err
	}
	g.key = key.Secret
	ok = true
	return g, nil
}

// stop shuts the gateway down and removes its data.
func (g *gatewayProc) stop() {
	if g.child != nil {
		g.child.stop(5 * time.Second)
	}
	_ = os.RemoveAll(g.dataDir)
}

// rebuildTimes changes the bench route n times through the admin API
// (alternating its strategy, which with one target changes nothing for
// traffic) and returns each round trip, sorted. Each write commits and then
// brings the routing snapshot and the gateway's table up to date (patched
// with what changed) before it answers, so the round trip bounds how long
// a change takes to reach the request path.
func (g *gatewayProc) rebuildTimes(ctx context.Context, n int) ([]time.Duration, error) {
	path := "/admin/v1/orgs/" + orgName + "/projects/" + projectName + "/routes/" + benchRoute
	var out []time.Duration
	for i := range n {
		strategy := []string{"round_robin", "weighted"}[i%2]
		d, err := g.adminCall(ctx, http.MethodPatch, path, map[string]any{"strategy": strategy}, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	slices.Sort(out)
	return out, nil
}

// createTimes creates n routes beside the bench route, one admin write
// each, and returns each round trip, sorted; then it deletes them. A create
// adds a target to a provider's catalog, which a PATCH of the bench route
// does not, so it times the other half of what a write can change (the
// provider's /v1/models entries). The routes are made after the load phase,
// away from the first round of health probes that follows start-up.
func (g *gatewayProc) createTimes(ctx context.Context, n int) ([]time.Duration, error) {
	base := "/admin/v1/orgs/" + orgName + "/projects/" + projectName + "/routes"
	var out []time.Duration
	for i := range n {
		d, err := g.adminCall(ctx, http.MethodPost, base, map[string]any{
			"model":   fmt.Sprintf("%s-extra-%d", benchRoute, i),
			"targets": []map[string]any{{"provider": mockSlug, "upstream_model": fmt.Sprintf("%s-extra-%d", upstreamName, i)}}}, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	for i := range n {
		if _, err := g.adminCall(ctx, http.MethodDelete, fmt.Sprintf("%s/%s-extra-%d", base, benchRoute, i), nil, nil); err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return out, nil
}

// adminClient sends the bench's admin API calls. The slowest is a bulk
// create of 1,000 hosts (seconds); the timeout turns a gateway that stops
// answering into an error instead of a run that hangs.
var adminClient = &http.Client{Timeout: time.Minute}

// adminStatusError is an admin API answer other than 2xx.
type adminStatusError struct {
	method, path string
	status       int
	body         []byte
}

func (e *adminStatusError) Error() string {
	return fmt.Sprintf("admin %s %s: %d %s", e.method, e.path, e.status, e.body)
}

// adminCall sends one admin API request, decodes a 2xx answer into out
// (when not nil) and returns the round trip time. Another status is an
// *adminStatusError.
func (g *gatewayProc) adminCall(ctx context.Context, method, path string, in, out any) (time.Duration, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, method, g.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+g.admin)
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := adminClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("admin %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	took := time.Since(t0)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode/100 != 2 {
		return 0, &adminStatusError{method: method, path: path, status: resp.StatusCode, body: b}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return 0, fmt.Errorf("admin %s %s: %w", method, path, err)
		}
	}
	return took, nil
}
