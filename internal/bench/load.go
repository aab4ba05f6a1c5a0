package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// endpoint is where load goes: the mock directly, or rolter in front of it.
type endpoint struct {
	via   string // "direct" or "rolter"
	base  string // http://host:port
	auth  string // Authorization value; empty for the mock, which wants none
	model string // "demo-model" for the mock, the route "bench" for rolter
}

// shape is what each request asks of the mock, through x-demo-* headers
// that rolter forwards unchanged.
type shape struct {
	stream     bool
	chunks     int // content chunks (x-demo-chunks)
	chunkDelay int // ms before each chunk (x-demo-chunk-delay-ms); 0: none
}

// client sends one kind of request to one endpoint. It is safe for
// concurrent use and cheap per request, because on a 2-core machine the
// load generator's CPU is taken from the processes being measured.
type client struct {
	hc     *http.Client
	tr     *http.Transport
	url    string
	hdr    http.Header // shared by all requests: the transport only reads it
	body   []byte
	stream bool
	bufs   sync.Pool // *readBuf
}

type readBuf struct {
	br  *bufio.Reader
	buf []byte
}

// newClient builds a client with its own connection pool of up to conns
// keep-alive connections, so the direct and rolter phases never share one.
func newClient(ep endpoint, sh shape, conns int) *client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0, // no global cap; per host below
		MaxIdleConnsPerHost: conns + 8,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true, // neither side compresses; the bench should not ask
		ForceAttemptHTTP2:   false,
	}
	c := &client{tr: tr, hc: &http.Client{Transport: tr}, url: ep.base + "/v1/chat/completions",
		hdr: http.Header{"Content-Type": {"application/json"}}, stream: sh.stream}
	if ep.auth != "" {
		c.hdr.Set("Authorization", ep.auth)
	}
	if sh.chunks > 0 {
		c.hdr.Set("X-Demo-Chunks", strconv.Itoa(sh.chunks))
	}
	if sh.chunkDelay > 0 {
		c.hdr.Set("X-Demo-Chunk-Delay-Ms", strconv.Itoa(sh.chunkDelay))
	}
	c.body = fmt.Appendf(nil, `{"model":%q,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Say hello to the benchmark."}],"max_tokens":256,"temperature":0.7,"stream":%t}`,
		ep.model, sh.stream)
	c.bufs.New = func() any { return &readBuf{br: bufio.NewReaderSize(nil, 4096), buf: make([]byte, 16<<10)} }
	return c
}

func (c *client) close() { c.tr.CloseIdleConnections() }

// do sends one request and reads the whole response. Latency counts from
// start, which for open-loop load is when the request was due, not when it
// left, so a stalled system cannot hide its queueing (coordinated
// omission).
func (c *client) do(ctx context.Context, start time.Time) sample {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(c.body))
	if err != nil {
		return sample{err: err.Error()}
	}
	req.Header = c.hdr
	resp, err := c.hc.Do(req)
	if err != nil {
		return sample{latency: time.Since(start), err: err.Error()}
	}
	defer resp.Body.Close()
	rb := c.bufs.Get().(*readBuf)
	defer c.bufs.Put(rb)
	rb.br.Reset(resp.Body)
	defer rb.br.Reset(nil) // do not keep the body alive in the pool

	if resp.StatusCode != http.StatusOK {
		n, _ := io.ReadFull(rb.br, rb.buf[:256])
		return sample{latency: time.Since(start), err: fmt.Sprintf("status %d: %s", resp.StatusCode, rb.buf[:n])}
	}
	var s sample
	if c.stream {
		if err := skipEvent(rb.br); err != nil {
			return sample{latency: time.Since(start), err: "before the first event: " + err.Error()}
		}
		s.ttfe = time.Since(start)
	}
	end, err := drain(rb.br, rb.buf)
	s.latency = time.Since(start)
	switch {
	case err != nil:
		s.err = err.Error()
	case c.stream && !bytes.HasSuffix(end, []byte("data: [DONE]\n\n")):
		s.err = fmt.Sprintf("stream did not end with [DONE] (ends %q)", end)
	case !c.stream && !bytes.HasSuffix(bytes.TrimSpace(end), []byte("}")):
		s.err = fmt.Sprintf("body is not a JSON object (ends %q)", end)
	}
	return s
}

// skipEvent reads up to and including the blank line that ends the first
// SSE event.
func skipEvent(br *bufio.Reader) error {
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			continue // a long line: not the blank one
		case err != nil:
			return err
		case len(line) == 1 || (len(line) == 2 && line[0] == '\r'):
			return nil
		}
	}
}

// drain reads r to EOF through buf and returns its last bytes (up to 16),
// enough to check how the body ended without keeping it.
func drain(r io.Reader, buf []byte) ([]byte, error) {
	var t [16]byte
	n := 0
	for {
		k, err := r.Read(buf)
		if k > 0 {
			// keep the last 16 bytes of (t[:n] + buf[:k])
			if k >= len(t) {
				n = copy(t[:], buf[k-len(t):k])
			} else {
				keep := min(n, len(t)-k)
				copy(t[:keep], t[n-keep:n])
				n = keep + copy(t[keep:], buf[:k])
			}
		}
		if err == io.EOF {
			return t[:n], nil
		}
		if err != nil {
			return t[:n], err
		}
	}
}

// closedLoop runs conc workers that each send a request as soon as their
// previous one finished, for d, and returns every request's sample.
func (c *client) closedLoop(ctx context.Context, conc int, d time.Duration) []sample {
	deadline := time.Now().Add(d)
	per := make([][]sample, conc)
	var wg sync.WaitGroup
	for i := range conc {
		wg.Go(func() {
			for ctx.Err() == nil {
				now := time.Now()
				if !now.Before(deadline) {
					return
				}
				per[i] = append(per[i], c.do(ctx, now))
			}
		})
	}
	wg.Wait()
	return slices.Concat(per...)
}

// maxInFlight bounds open-loop load: a request due while this many are
// still running is counted as dropped instead of sent, so an overloaded
// system shows up as drops and latency rather than as a bench that eats
// all memory.
const maxInFlight = 4096

// openLoop sends requests at a fixed rate for d, whether or not earlier ones
// have finished, and returns the samples and how many were dropped.
func (c *client) openLoop(ctx context.Context, rate float64, d time.Duration) ([]sample, int) {
	interval := time.Duration(float64(time.Second) / rate)
	n := int(d / interval)
	var (
		mu      sync.Mutex
		out     = make([]sample, 0, n)
		sem     = make(chan struct{}, maxInFlight)
		wg      sync.WaitGroup
		dropped int
	)
	start := time.Now()
	for i := range n {
		// Due times are absolute, so a late wake-up sends the requests it
		// missed right away instead of drifting the rate down.
		due := start.Add(time.Duration(i) * interval)
		if w := time.Until(due); w > 0 {
			time.Sleep(w)
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case sem <- struct{}{}:
		default:
			dropped++
			continue
		}
		wg.Go(func() {
			s := c.do(ctx, due)
			<-sem
			mu.Lock()
			out = append(out, s)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out, dropped
}
