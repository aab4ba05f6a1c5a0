package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/rolter/rolter/internal/agent"
	"github.com/rolter/rolter/internal/clock"
	"github.com/rolter/rolter/internal/demo"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/httpbody"
)

// box is one simulated GPU box of the fleet scenario: a fake vLLM (the
// demo upstream, which answers /health, /v1/models and chat) listening on
// an address of its own in 127.0.0.0/8, and a fake agent that polls the
// gateway's /vllm/config from that address and reports, as `rolter
// agent` does.
type box struct {
	ip   netip.Addr
	port int
	srv  *http.Server
	// served is closed when srv.Serve has returned: stopBoxes waits for
	// it, so that no box's server outlives the scenario.
	served chan struct{}
	// agent's client, bound to ip: the gateway knows a box by the address
	// it connects from.
	agent *http.Client
}

// boxIP is the i-th box's address: 127.1.0.1, 127.1.0.2, ... (250 per /24).
func boxIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, 1 + byte(i/62500), byte(i / 250 % 250), byte(i%250 + 1)})
}

// startBoxes starts n fake vLLMs, each on its own loopback address, all
// served by one demo handler.
func startBoxes(n int) ([]*box, error) {
	h := demo.New(demo.Options{})
	boxes := make([]*box, 0, n)
	for i := range n {
		ip := boxIP(i)
		ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
		if err != nil {
			stopBoxes(boxes)
			return nil, fmt.Errorf("box %d on %s: %w", i, ip, err)
		}
		b := &box{ip: ip, port: ln.Addr().(*net.TCPAddr).Port, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
			served: make(chan struct{})}
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: ip.AsSlice()}, Timeout: 10 * time.Second}
		b.agent = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{Proxy: nil, DialContext: d.DialContext,
			MaxIdleConnsPerHost: 1, IdleConnTimeout: 90 * time.Second}}
		go func() {
			defer close(b.served)
			_ = b.srv.Serve(ln)
		}()
		boxes = append(boxes, b)
	}
	return boxes, nil
}

// kill closes the box's vLLM: its listener and every connection, as a
// box that lost power refuses what follows. Its agent stops with the
// agents' context.
func (b *box) kill() { _ = b.srv.Close() }

// stopBoxes kills every box and waits for their servers to return.
func stopBoxes(boxes []*box) {
	for _, b := range boxes {
		b.kill()
		b.agent.CloseIdleConnections()
	}
	for _, b := range boxes {
		<-b.served
	}
}

// configTimes collects the /vllm/config round trips of every agent.
type configTimes struct {
	mu     sync.Mutex
	times  []time.Duration
	errors int
	first  string
}

func (c *configTimes) add(d time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.errors++
		if c.first == "" {
			c.first = err.Error()
		}
		return
	}
	c.times = append(c.times, d)
}

// reset returns what was collected and starts afresh.
func (c *configTimes) reset() ([]time.Duration, int, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, n, f := c.times, c.errors, c.first
	c.times, c.errors, c.first = nil, 0, ""
	return t, n, f
}

// runAgent polls gateway's /vllm/config every interval (the first poll
// at a random point of the first interval, as boxes that started at
// different times do) and reports the assignments' revisions as running,
// until ctx ends. Like `rolter agent` it reports only what changed (the
// report, or the configuration it answers) and otherwise a heartbeat
// every agent.ReportHeartbeat, and a fetch that no report is due to
// follow asks for its connection to be closed. A box whose vLLM was
// killed keeps polling: its agent lives on, as on a box whose GPU process
// died.
func (b *box) runAgent(ctx context.Context, gateway, fleetKey string, interval time.Duration, out *configTimes) {
	t := time.NewTimer(rand.N(interval)) //nolint:gosec // G404: start jitter of the fake agents, not a secret
	defer t.Stop()
	var lastCfg, sent []byte // the last configuration fetched, the last report accepted
	var sentAt time.Time
	for clock.Wait(ctx, t.C) {
		t.Reset(interval)
		t0 := time.Now()
		due := sent == nil || t0.Sub(sentAt) >= agent.ReportHeartbeat
		cfg, raw, err := b.fetchConfig(ctx, gateway, fleetKey, !due)
		if ctx.Err() != nil {
			return
		}
		out.add(time.Since(t0), err)
		if err != nil {
			continue
		}
		rep := reportOf(cfg)
		if !due && bytes.Equal(raw, lastCfg) && bytes.Equal(rep, sent) {
			continue
		}
		lastCfg, sent = raw, nil
		if b.report(ctx, gateway, fleetKey, rep) == nil {
			sent, sentAt = rep, t0
		}
	}
}

// fetchConfig gets the box's configuration and its body as sent;
// closeConn asks the gateway to close the connection after it.
func (b *box) fetchConfig(ctx context.Context, gateway, fleetKey string, closeConn bool) (*fleetapi.Config, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gateway+fleetapi.ConfigPath, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Close = closeConn
	req.Header.Set("Authorization", "Bearer "+fleetKey)
	resp, err := b.agent.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := httpbody.ReadOK(resp, 1<<20)
	if err != nil {
		return nil, nil, fmt.Errorf("/vllm/config: %w", err)
	}
	var cfg fleetapi.Config
	if err := json.Unmarshal(body, &cfg); err != nil {
		return nil, nil, fmt.Errorf("/vllm/config: %w", err)
	}
	return &cfg, body, nil
}

// reportOf is the report of a box that runs every assignment's revision.
func reportOf(cfg *fleetapi.Config) []byte {
	rep := fleetapi.Report{Discovered: fleetapi.Discovered{GPU: "1x simulated", GPUCount: 1, VRAMGB: 80, DiskFreeGB: 500, VLLMVersion: "bench"}}
	for _, a := range cfg.Assignments {
		rep.Applied = append(rep.Applied, fleetapi.Applied{HostID: a.HostID, Revision: a.Revision, Fit: fleetapi.FitUnchecked})
	}
	body, _ := json.Marshal(rep)
	return body
}

// report sends body to the gateway; nil when it accepted it.
func (b *box) report(ctx context.Context, gateway, fleetKey string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, gateway+fleetapi.ReportPath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+fleetKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.agent.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("%s: %s", fleetapi.ReportPath, resp.Status)
	}
	return nil
}
