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
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
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

// completionRequest holds the only request fields the simulator acts on;
// everything else (messages, prompt, sampling) is accepted and ignored.
type completionRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
}

// kind distinguishes the two completion endpoints, which differ only in
// object names and where the text goes.
type kind struct {
	idPrefix    string
	object      string // non-streamed object
	chunkObject string // streamed object
	chat        bool
}

var (
	chatKind = kind{idPrefix: "chatcmpl-demo-", object: "chat.completion", chunkObject: "chat.completion.chunk", chat: true}
	textKind = kind{idPrefix: "cmpl-demo-", object: "text_completion", chunkObject: "text_completion"}
)

func (h *handler) serveChat(w http.ResponseWriter, r *http.Request, cfg reqConfig) {
	h.serveCompletion(w, r, cfg, chatKind)
}

func (h *handler) serveCompletions(w http.ResponseWriter, r *http.Request, cfg reqConfig) {
	h.serveCompletion(w, r, cfg, textKind)
}

func (h *handler) serveCompletion(w http.ResponseWriter, r *http.Request, cfg reqConfig, k kind) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req completionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeInvalid(w, "invalid JSON body: "+err.Error())
		return
	}
	if req.Model == "" {
		writeInvalid(w, "model is required")
		return
	}
	limit := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		limit = req.MaxCompletionTokens
	}
	if limit != nil && *limit < 1 {
		writeInvalid(w, "max_tokens must be at least 1")
		return
	}

	sc := h.script(cfg.chunks)
	n, finish := len(sc.raw), "stop"
	if limit != nil && *limit < n {
		// Cut the text short like a real length stop, rather than re-split
		// it, so the reply reads as truncated.
		n, finish = *limit, "length"
	}
	u := usage{PromptTokens: max(len(body)/4, 1), CompletionTokens: n}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	id := k.idPrefix + strconv.FormatUint(h.seq.Add(1), 10)
	created := time.Now().Unix()

	if req.Stream {
		includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		h.stream(w, r, cfg, k, streamPlan{
			id: id, created: created, model: req.Model,
			pieces: sc.encoded[:n], finish: finish, usage: u, includeUsage: includeUsage,
		})
		return
	}

	// A non-streamed reply arrives only when generation is done, so it
	// waits for the whole simulated generation, not just the first byte.
	cfg.firstByteDelay += time.Duration(n) * cfg.chunkDelay
	if !begin(r, cfg) {
		return
	}
	text := sc.joined
	if n < len(sc.raw) {
		text = strings.Join(sc.raw[:n], "")
	}
	resp := completionResponse{
		ID: id, Object: k.object, Created: created, Model: req.Model, Usage: u,
		Choices: []completionChoice{{FinishReason: finish}},
	}
	if k.chat {
		resp.Choices[0].Message = &chatMessage{Role: "assistant", Content: text}
	} else {
		resp.Choices[0].Text = &text
	}
	writeBody(w, http.StatusOK, mustJSON(resp))
}

type streamPlan struct {
	id           string
	created      int64
	model        string
	pieces       [][]byte
	finish       string
	usage        usage
	includeUsage bool
}

// stream writes the SSE events by appending pre-encoded fragments into one
// reused buffer, because this loop is what load tests hammer.
func (h *handler) stream(w http.ResponseWriter, r *http.Request, cfg reqConfig, k kind, p streamPlan) {
	ctx := r.Context()
	if !begin(r, cfg) {
		return
	}

	// Every event starts `data: {"id":...,"model":...,`; build it once.
	model, err := json.Marshal(p.model)
	if err != nil {
		// Unreachable for a string, but never emit malformed JSON.
		writeInvalid(w, "model is not encodable")
		return
	}
	head := make([]byte, 0, 128+len(model))
	head = append(head, `data: {"id":"`...)
	head = append(head, p.id...)
	head = append(head, `","object":"`...)
	head = append(head, k.chunkObject...)
	head = append(head, `","created":`...)
	head = strconv.AppendInt(head, p.created, 10)
	head = append(head, `,"model":`...)
	head = append(head, model...)
	head = append(head, ',')

	var open, tail string
	if k.chat {
		open, tail = `"choices":[{"index":0,"delta":{"content":`, `},"logprobs":null,"finish_reason":null}]}`+"\n\n"
	} else {
		open, tail = `"choices":[{"index":0,"text":`, `,"logprobs":null,"finish_reason":null}]}`+"\n\n"
	}

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// /v1/completions has no role chunk, so flush the headers alone to make
	// the response visibly start when the first-byte delay ends.
	if !k.chat {
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return
		}
	}
	buf := make([]byte, 0, 512)
	send := func() bool {
		if _, err := w.Write(buf); err != nil {
			return false
		}
		// A writer that cannot flush still gets the whole stream, just
		// late; that is not a reason to abort.
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		return true
	}

	if k.chat {
		buf = append(append(buf, head...), `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		if !send() {
			return
		}
	}
	var timer pacer
	defer timer.stop()
	for _, piece := range p.pieces {
		// Each chunk is one simulated token, so each costs one delay; this
		// keeps a streamed reply as long as a non-streamed one.
		if !timer.sleep(ctx, cfg.chunkDelay) {
			return
		}
		buf = append(append(append(append(buf[:0], head...), open...), piece...), tail...)
		if !send() {
			return
		}
	}

	buf = append(buf[:0], head...)
	if k.chat {
		buf = append(buf, `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
	} else {
		buf = append(buf, `"choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"`...)
	}
	buf = append(append(buf, p.finish...), `"}]}`+"\n\n"...)
	if !send() {
		return
	}

	if p.includeUsage {
		buf = append(append(buf[:0], head...), `"choices":[],"usage":{"prompt_tokens":`...)
		buf = strconv.AppendInt(buf, int64(p.usage.PromptTokens), 10)
		buf = append(buf, `,"completion_tokens":`...)
		buf = strconv.AppendInt(buf, int64(p.usage.CompletionTokens), 10)
		buf = append(buf, `,"total_tokens":`...)
		buf = strconv.AppendInt(buf, int64(p.usage.TotalTokens), 10)
		buf = append(buf, "}}\n\n"...)
		if !send() {
			return
		}
	}
	buf = append(buf[:0], "data: [DONE]\n\n"...)
	send()
}

type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
}

func (h *handler) serveEmbeddings(w http.ResponseWriter, r *http.Request, cfg reqConfig) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var req embeddingRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeInvalid(w, "invalid JSON body: "+err.Error())
		return
	}
	if req.Model == "" {
		writeInvalid(w, "model is required")
		return
	}
	// Dispatch on the first byte: unmarshalling null into either Go type
	// succeeds silently, and a missing input must still be a 400.
	var inputs []string
	var err error
	switch {
	case len(req.Input) > 0 && req.Input[0] == '"':
		var one string
		err = json.Unmarshal(req.Input, &one)
		inputs = []string{one}
	case len(req.Input) > 0 && req.Input[0] == '[':
		err = json.Unmarshal(req.Input, &inputs)
	}
	if err != nil || len(inputs) == 0 {
		writeInvalid(w, "input must be a string or a non-empty array of strings")
		return
	}
	// The official OpenAI Python SDK asks for base64 unless told otherwise,
	// so supporting it is what makes the demo work with that SDK's defaults.
	b64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		writeInvalid(w, `encoding_format must be "float" or "base64"`)
		return
	}
	if !begin(r, cfg) {
		return
	}

	resp := embeddingResponse{
		ID:      "embd-demo-" + strconv.FormatUint(h.seq.Add(1), 10),
		Object:  "list",
		Created: time.Now().Unix(),
		Model:   req.Model,
		Data:    make([]embedding, len(inputs)),
	}
	for i, in := range inputs {
		vec := embed(in)
		resp.Data[i] = embedding{Object: "embedding", Index: i, Embedding: vec}
		if b64 {
			raw := make([]byte, 4*len(vec))
			for j, f := range vec {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(f))
			}
			resp.Data[i].Embedding = base64.StdEncoding.EncodeToString(raw)
		}
		resp.Usage.PromptTokens += max(len(in)/4, 1)
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	writeBody(w, http.StatusOK, mustJSON(resp))
}

// embed derives a unit vector from the input's hash: deterministic, so tests
// and caches can compare results, and normalised like real embedding models
// so cosine similarity behaves.
func embed(s string) []float32 {
	f := fnv.New64a()
	_, _ = io.WriteString(f, s)
	x := f.Sum64()
	vec := make([]float32, embeddingDims)
	var norm float64
	for i := range vec {
		// splitmix64: cheap, well-mixed successive values from one seed.
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		v := float64(z>>11)/(1<<53)*2 - 1
		vec[i] = float32(v)
		norm += v * v
	}
	if norm = math.Sqrt(norm); norm > 0 {
		for i := range vec {
			vec[i] = float32(float64(vec[i]) / norm)
		}
	}
	return vec
}

// script returns the completion split into n pieces, from the cache when it
// can.
func (h *handler) script(n int) *script {
	if n == h.opts.Chunks {
		return h.def
	}
	if s, ok := h.scripts.Load(n); ok {
		return s.(*script)
	}
	s := h.buildScript(n)
	if h.scriptCount.Add(1) <= maxCachedScripts {
		if prev, loaded := h.scripts.LoadOrStore(n, s); loaded {
			h.scriptCount.Add(-1)
			return prev.(*script)
		}
	}
	return s
}

// buildScript splits the text into n non-empty pieces at word boundaries,
// like a tokenizer that emits whole words. When n exceeds the word count the
// text is repeated until there are enough words, so large chunk counts still
// simulate long generations instead of being silently capped.
func (h *handler) buildScript(n int) *script {
	words := h.words
	if len(words) < n {
		ext := make([]string, 0, n+len(h.words))
		for len(ext) < n {
			for i, wd := range h.words {
				// Keep a separator between repetitions.
				if len(ext) > 0 && i == 0 {
					if last := ext[len(ext)-1]; !endsWithSpace(last) {
						ext[len(ext)-1] = last + " "
					}
				}
				ext = append(ext, wd)
			}
		}
		words = ext
	}
	s := &script{raw: make([]string, n), encoded: make([][]byte, n)}
	var sb strings.Builder
	for i := range n {
		// Even split: piece i gets words [i*W/n, (i+1)*W/n), never empty
		// because W >= n.
		lo, hi := i*len(words)/n, (i+1)*len(words)/n
		s.raw[i] = strings.Join(words[lo:hi], "")
		s.encoded[i] = mustJSON(s.raw[i])
		sb.WriteString(s.raw[i])
	}
	s.joined = sb.String()
	return s
}

// splitWords cuts text into words that each carry their trailing whitespace
// (the first also carries any leading whitespace), so the words concatenate
// back to text exactly.
func splitWords(text string) []string {
	var words []string
	start := 0
	prevSpace := false
	for i, r := range text {
		space := unicode.IsSpace(r)
		if !space && prevSpace && i > 0 && strings.TrimSpace(text[start:i]) != "" {
			words = append(words, text[start:i])
			start = i
		}
		prevSpace = space
	}
	return append(words, text[start:])
}

func endsWithSpace(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return unicode.IsSpace(r)
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

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large",
				fmt.Sprintf("request body exceeds %d bytes", maxBodyBytes))
		} else {
			writeInvalid(w, "cannot read request body: "+err.Error())
		}
		return nil, false
	}
	if len(body) == 0 {
		writeInvalid(w, "request body is required")
		return nil, false
	}
	return body, true
}

// OpenAI wire shapes.

type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   usage              `json:"usage"`
}

type completionChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Text         *string      `json:"text,omitempty"`
	Logprobs     any          `json:"logprobs"`
	FinishReason string       `json:"finish_reason"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type embeddingResponse struct {
	ID      string      `json:"id"`
	Object  string      `json:"object"`
	Created int64       `json:"created"`
	Model   string      `json:"model"`
	Data    []embedding `json:"data"`
	Usage   struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

type embedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
}

func writeInvalid(w http.ResponseWriter, msg string) {
	writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", msg)
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	writeBody(w, status, mustJSON(apiError{Error: apiErrorBody{Message: msg, Type: typ, Code: code}}))
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// mustJSON marshals values whose types cannot fail to encode (no channels,
// funcs or cyclic data), so an error here is a programming mistake.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("demo: " + err.Error())
	}
	return b
}
