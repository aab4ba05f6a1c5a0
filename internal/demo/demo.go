// Package demo is a built-in simulated OpenAI-compatible upstream.
//
// It exists so that a newcomer can run `rolter serve --demo` and send a real
// request end to end without a GPU or an API key, and so that load tests have
// an upstream whose latency is known and whose cost is negligible next to the
// gateway being measured. It mimics vLLM's wire shapes (including the
// role-only first stream chunk and the optional usage chunk) because vLLM is
// the upstream rolter most often fronts, and differences there are exactly
// what a demo should not hide.
//
// Timing and failures can be steered per request with headers, so tests and
// benchmarks need no separate simulator configuration:
//
//	x-demo-chunks: N                content chunks in the completion
//	x-demo-chunk-delay-ms: N        pause before each content chunk
//	x-demo-first-byte-delay-ms: N   pause before the response starts
//	x-demo-status: 503              answer with this status and an OpenAI error
package demo

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for zero-valued Options.
const (
	DefaultChunks = 8
	DefaultText   = "Hello from rolter's demo upstream! This reply is simulated, so no GPU or API key was needed to produce it."
)

// The single model the simulator advertises. Requests may name any model;
// it is echoed back, as vLLM does for its served model name.
const (
	ModelID       = "demo-model"
	modelOwner    = "rolter-demo"
	modelCreated  = 1735689600 // fixed so /v1/models is byte-for-byte stable
	modelMaxLen   = 8192
	embeddingDims = 8
)

// Bounds on header overrides: generous enough for load tests, tight enough
// that one request cannot pin memory or a connection for hours.
const (
	maxChunks    = 10000
	maxDelayMS   = 10 * 60 * 1000
	maxBodyBytes = 8 << 20
	// Pre-split pieces are cached per chunk count so a load tool that sends
	// the same x-demo-chunks on every request pays for the split once; the
	// cap keeps hostile or random counts from growing the cache unbounded.
	maxCachedScripts = 64
)

// Options configure the simulator. Zero values take the defaults shown.
type Options struct {
	Chunks         int           // content chunks per streamed completion (default 8)
	ChunkDelay     time.Duration // pause between stream chunks (default 0)
	FirstByteDelay time.Duration // pause before the response starts (default 0)
	Text           string        // the completion text, split across chunks (default DefaultText)
}

// New returns the simulator's handler, rooted at "/" (so /v1/models,
// /v1/chat/completions, /health, ...). Negative values in o are treated as
// zero, and a Text with nothing but whitespace as empty, because New has no
// error to return and a demo should start rather than refuse.
func New(o Options) http.Handler {
	if o.Chunks <= 0 {
		o.Chunks = DefaultChunks
	}
	if o.Chunks > maxChunks {
		o.Chunks = maxChunks
	}
	o.ChunkDelay = max(o.ChunkDelay, 0)
	o.FirstByteDelay = max(o.FirstByteDelay, 0)
	if strings.TrimSpace(o.Text) == "" {
		o.Text = DefaultText
	}
	h := &handler{opts: o, words: splitWords(o.Text)}
	h.def = h.buildScript(o.Chunks)
	h.models = mustJSON(modelList{
		Object: "list",
		Data: []modelCard{{
			ID: ModelID, Object: "model", Created: modelCreated,
			OwnedBy: modelOwner, MaxModelLen: modelMaxLen,
		}},
	})
	return h
}

type handler struct {
	opts   Options
	words  []string
	def    *script
	models []byte

	scripts     sync.Map // int -> *script
	scriptCount atomic.Int32
	seq         atomic.Uint64
}

// script is a completion split into chunks, pre-encoded so the stream loop
// only appends bytes.
type script struct {
	raw     []string // pieces as text, for non-streamed replies
	encoded [][]byte // the same pieces as JSON string literals
	joined  string   // all of raw, concatenated
}

// reqConfig is Options after the request's header overrides.
type reqConfig struct {
	chunks         int
	chunkDelay     time.Duration
	firstByteDelay time.Duration
	status         int // 0: no simulated failure
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var serve func(http.ResponseWriter, *http.Request, reqConfig)
	read := false
	switch r.URL.Path {
	case "/health":
		serve, read = h.serveHealth, true
	case "/v1/models":
		serve, read = h.serveModels, true
	case "/v1/chat/completions":
		serve = h.serveChat
	case "/v1/completions":
		serve = h.serveCompletions
	case "/v1/embeddings":
		serve = h.serveEmbeddings
	default:
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found",
			fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
		return
	}
	allow, ok := "POST", r.Method == http.MethodPost
	if read {
		allow, ok = "GET, HEAD", r.Method == http.MethodGet || r.Method == http.MethodHead
	}
	if !ok {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed",
			fmt.Sprintf("method %s not allowed on %s; use %s", r.Method, r.URL.Path, allow))
		return
	}
	cfg, err := h.config(r.Header)
	if err != nil {
		writeInvalid(w, err.Error())
		return
	}
	if cfg.status != 0 {
		fail(w, r, cfg)
		return
	}
	serve(w, r, cfg)
}

// config applies the x-demo-* overrides. Empty header values count as
// absent so that proxies which blank headers do not turn into 400s.
func (h *handler) config(hdr http.Header) (reqConfig, error) {
	cfg := reqConfig{
		chunks:         h.opts.Chunks,
		chunkDelay:     h.opts.ChunkDelay,
		firstByteDelay: h.opts.FirstByteDelay,
	}
	if v := hdr.Get("X-Demo-Chunks"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxChunks {
			return cfg, fmt.Errorf("x-demo-chunks must be an integer from 1 to %d, got %q", maxChunks, v)
		}
		cfg.chunks = n
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{
		{"X-Demo-Chunk-Delay-Ms", &cfg.chunkDelay},
		{"X-Demo-First-Byte-Delay-Ms", &cfg.firstByteDelay},
	} {
		if v := hdr.Get(d.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > maxDelayMS {
				return cfg, fmt.Errorf("%s must be an integer from 0 to %d, got %q", strings.ToLower(d.name), maxDelayMS, v)
			}
			*d.dst = time.Duration(n) * time.Millisecond
		}
	}
	if v := hdr.Get("X-Demo-Status"); v != "" {
		n, err := strconv.Atoi(v)
		// Only error statuses: the override promises an error body, and a
		// 2xx carrying one would teach clients the wrong thing.
		if err != nil || n < 400 || n > 599 {
			return cfg, fmt.Errorf("x-demo-status must be an integer from 400 to 599, got %q", v)
		}
		cfg.status = n
	}
	return cfg, nil
}

// fail plays a simulated upstream failure. It ignores the request body: a
// load test that wants errors should get them whatever it sends.
func fail(w http.ResponseWriter, r *http.Request, cfg reqConfig) {
	if !sleep(r.Context(), cfg.firstByteDelay) {
		return
	}
	typ := "server_error"
	if cfg.status < 500 {
		typ = "invalid_request_error"
	}
	writeError(w, cfg.status, typ, "simulated_error",
		fmt.Sprintf("simulated upstream error (status %d, from x-demo-status)", cfg.status))
}

// begin waits out the first-byte delay, reporting whether the client is
// still there to answer.
func begin(r *http.Request, cfg reqConfig) bool {
	return sleep(r.Context(), cfg.firstByteDelay)
}

func (h *handler) serveHealth(w http.ResponseWriter, r *http.Request, cfg reqConfig) {
	if begin(r, cfg) {
		w.WriteHeader(http.StatusOK)
	}
}

func (h *handler) serveModels(w http.ResponseWriter, r *http.Request, cfg reqConfig) {
	if begin(r, cfg) {
		writeBody(w, http.StatusOK, h.models)
	}
}

// pacer sleeps on one reusable timer per request, and wakes early when the
// client goes away so no handler outlives its connection.
type pacer struct{ t *time.Timer }

func (p *pacer) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	if p.t == nil {
		p.t = time.NewTimer(d)
	} else {
		p.t.Reset(d)
	}
	select {
	case <-p.t.C:
		return true
	case <-ctx.Done():
		p.t.Stop()
		return false
	}
}

func (p *pacer) stop() {
	if p.t != nil {
		p.t.Stop()
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	var p pacer
	defer p.stop()
	return p.sleep(ctx, d)
}
