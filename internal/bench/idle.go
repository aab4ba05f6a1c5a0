package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// idleDelayMS is the mock's pause before each content chunk of an idle
// stream: the longest it allows (10 minutes), so nothing flows after the
// first event while the bench measures. The gateway's default idle timeout
// (120s) is far beyond the time the measurement takes.
const idleDelayMS = 10 * 60 * 1000

// maxOpening bounds streams being opened at once, so that ramping up is a
// steady stream of connections rather than a SYN flood that overflows the
// listen backlog.
const maxOpening = 256

// runIdle is the idle-streams scenario: a fresh mock and gateway, N streams
// opened through rolter that each receive their first event and then stay
// open and silent, and the gateway's RSS before and with them.
func (b *run) runIdle(ctx context.Context) error {
	n := b.opts.Streams
	// Each stream holds one socket in the bench and the mock and two in
	// the gateway, which inherits the bench's limit.
	if limit := raiseFileLimit(uint64(2*n + 1024)); limit > 0 && uint64(2*n+1024) > limit {
		fit := max((int(limit)-1024)/2, 1)
		b.rep.Notes = append(b.rep.Notes, fmt.Sprintf("idle-streams: %d streams asked, %d fit the open-file limit of %d", n, fit, limit))
		n = fit
	}
	mock, mockURL, err := startMock(b.opts.Exe)
	if err != nil {
		return err
	}
	defer mock.stop(5 * time.Second)
	gw, err := startGateway(ctx, b.opts.Exe, mockURL, b.opts.Routes, 1, b.opts.keyFields())
	if err != nil {
		return err
	}
	defer gw.stop()

	// Warm the gateway with ordinary streams first, so the baseline is a
	// process that has served traffic, not one that has only started.
	warm := newClient(gw.endpoint(), shape{stream: true, chunks: streamChunks}, 8)
	warm.closedLoop(ctx, 8, time.Second)
	warm.close()
	time.Sleep(settle)
	gwBefore, err := sampleProc(gw.pid())
	if err != nil {
		return err
	}
	mockBefore, err := sampleProc(mock.pid())
	if err != nil {
		return err
	}
	rtBefore := runtimeMetrics(ctx, gw.url)

	fmt.Fprintf(b.opts.Progress, "idle-streams: opening %d streams through rolter\n", n)
	res := &IdleResult{Asked: b.opts.Streams}
	c := newClient(gw.endpoint(), shape{stream: true, chunks: 2, chunkDelay: idleDelayMS}, n)
	defer c.close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg             sync.WaitGroup
		opened, failed atomic.Int64
		errOnce        sync.Once
		sem            = make(chan struct{}, maxOpening)
	)
	t0 := time.Now()
	for range n {
		sem <- struct{}{}
		wg.Go(func() {
			body, err := c.openStream(sctx)
			<-sem
			if err != nil {
				failed.Add(1)
				errOnce.Do(func() { res.FirstError = err.Error() })
				return
			}
			opened.Add(1)
			// Hold the stream until the bench is done measuring; cancel
			// closes the connection and ends this read.
			_, _ = io.Copy(io.Discard, body)
			body.Close()
		})
	}
	for opened.Load()+failed.Load() < int64(n) && time.Since(t0) < 3*time.Minute && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	res.RampS = time.Since(t0).Seconds()
	time.Sleep(time.Second) // let the last handlers settle into their waits
	gwAfter, err := sampleProc(gw.pid())
	if err != nil {
		return err
	}
	mockAfter, err := sampleProc(mock.pid())
	if err != nil {
		return err
	}
	rtAfter := runtimeMetrics(ctx, gw.url)
	res.Open = int(opened.Load())
	cancel()
	wg.Wait()

	if res.Open > 0 {
		per := func(after, before float64) float64 { return (after - before) / float64(res.Open) }
		res.GatewayKiB = per(float64(gwAfter.rss), float64(gwBefore.rss)) / 1024
		res.MockKiB = per(float64(mockAfter.rss), float64(mockBefore.rss)) / 1024
		res.Goroutines = per(rtAfter["go_goroutines"], rtBefore["go_goroutines"])
		res.HeapKiB = per(rtAfter["go_memstats_heap_inuse_bytes"], rtBefore["go_memstats_heap_inuse_bytes"]) / 1024
		res.StackKiB = per(rtAfter["go_memstats_stack_inuse_bytes"], rtBefore["go_memstats_stack_inuse_bytes"]) / 1024
	}
	res.GatewayRSS, res.GatewayBefore = gwAfter.rss, gwBefore.rss
	b.rep.Idle = res
	fmt.Fprintf(b.opts.Progress, "idle-streams: %d open in %.1fs, gateway %.1f KiB/stream\n", res.Open, res.RampS, res.GatewayKiB)
	return nil
}

// openStream starts a streamed request and returns its body once the first
// event has arrived.
func (c *client) openStream(ctx context.Context) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return nil, err
	}
	req.Header = c.hdr
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		resp.Body.Close()
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	br := bufio.NewReaderSize(resp.Body, 512)
	if err := skipEvent(br); err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("before the first event: %w", err)
	}
	return struct {
		io.Reader
		io.Closer
	}{br, resp.Body}, nil
}

// runtimeMetrics reads the gateway's Go runtime gauges from its /metrics
// (Prometheus text format), to split its RSS into heap and stacks. It
// returns an empty map if they cannot be read; they are an explanation, not
// a measurement the targets depend on.
func runtimeMetrics(ctx context.Context, base string) map[string]float64 {
	out := map[string]float64{}
	eachMetric(ctx, base, func(line string) {
		name, value, ok := strings.Cut(line, " ")
		switch {
		case !ok:
		case name == "go_goroutines", name == "go_memstats_heap_inuse_bytes", name == "go_memstats_stack_inuse_bytes":
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				out[name] = v
			}
		}
	})
	return out
}

// eachMetric calls fn with each line of the gateway's /metrics (Prometheus
// text format, lines up to 1 MiB); nothing when it cannot be read.
func eachMetric(ctx context.Context, base string, fn func(line string)) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fn(sc.Text())
	}
}
