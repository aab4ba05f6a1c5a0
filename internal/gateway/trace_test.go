package gateway

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/testkit"
	"github.com/rolter/rolter/internal/tracing"
)

// tracedHarness is a harness whose gateway exports spans over OTLP/HTTP to
// a receiver in the test process, as it would to a collector.
type tracedHarness struct {
	*harness
	recv *tracing.Receiver
	tp   *sdktrace.TracerProvider
}

func newTracedHarness(t *testing.T) *tracedHarness {
	t.Helper()
	h := newHarness(t, Config{})
	recv := &tracing.Receiver{Keep: true}
	coll := httptest.NewServer(recv)
	t.Cleanup(coll.Close)
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(coll.URL+"/v1/traces"))
	must(t, err)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	// The same snapshot, a traced gateway in front of it.
	h.gw = New(Config{}, h.snap, Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: h.clock, Usage: h.usage,
		Registry: prometheus.NewRegistry(), Tracer: tp})
	h.srv.Close()
	h.srv = httptest.NewServer(h.gw)
	t.Cleanup(h.srv.Close)
	return &tracedHarness{harness: h, recv: recv, tp: tp}
}

// spans flushes the exporter until the trace of traceID has n spans (the
// server span ends after the answer reached the client) and returns them.
func (h *tracedHarness) spans(traceID string, n int) []tracing.Span {
	h.t.Helper()
	var got []tracing.Span
	testkit.Eventually(h.t, "the trace's spans at the receiver", func() bool {
		must(h.t, h.tp.ForceFlush(context.Background()))
		got = got[:0]
		for _, s := range h.recv.Spans() {
			if hex.EncodeToString(s.TraceId) == traceID {
				got = append(got, s)
			}
		}
		return len(got) >= n
	})
	if len(got) != n {
		h.t.Fatalf("%d spans in trace %s, want %d", len(got), traceID, n)
	}
	return got
}

func byKind(spans []tracing.Span, kind tracepb.Span_SpanKind) []tracing.Span {
	var out []tracing.Span
	for _, s := range spans {
		if s.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}

// traceparents records the traceparent header of each upstream request.
type traceparents struct {
	mu  sync.Mutex
	got []string
}

func (p *traceparents) add(r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, r.Header.Get("Traceparent"))
}

func (p *traceparents) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.got...)
}

const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
)

func TestTraceFailoverSpans(t *testing.T) {
	h := newTracedHarness(t)
	var seen traceparents
	bad := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		seen.add(r)
		w.WriteHeader(500)
		_, _ = io.WriteString(w, `{"error":"internal detail"}`)
	})
	good := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		seen.add(r)
		_, _ = io.WriteString(w, vllmChatResponse)
	})
	const poolKey = "sk-pool-secret-0123456789"
	a := h.provider("bad", bad.base(), store.ProviderSettings{}, poolKey)
	b := h.provider("good", good.base(), store.ProviderSettings{}, poolKey)
	// round_robin starts at the first target: the failover is forced.
	h.route("m", "round_robin", store.Target{ProviderID: a, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1},
		store.Target{ProviderID: b, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1})
	const prompt = "a private prompt the spans must not carry"
	resp := h.post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`+prompt+`"}]}`,
		"Traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-01", "X-Request-Id", "trace-req-1")
	if body := readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}

	spans := h.spans(clientTraceID, 3)
	servers, attempts := byKind(spans, tracepb.Span_SPAN_KIND_SERVER), byKind(spans, tracepb.Span_SPAN_KIND_CLIENT)
	if len(servers) != 1 || len(attempts) != 2 {
		t.Fatalf("%d server and %d attempt spans, want 1 and 2", len(servers), len(attempts))
	}
	srv := servers[0]
	// The client's traceparent is the server span's parent.
	if got := hex.EncodeToString(srv.ParentSpanId); got != clientSpanID {
		t.Fatalf("server span's parent %s, want the client's span %s", got, clientSpanID)
	}
	for k, want := range map[string]string{
		"http.request.method": "POST", "http.route": "/v1/chat/completions", "http.response.status_code": "200",
		"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "gen_ai.response.model": "Qwen/Qwen3-8B",
		"gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": "18",
		"rolter.attempts": "2", "rolter.provider": "good", "rolter.route": "m", "rolter.org": "default",
		"rolter.project": "default", "rolter.request_id": "trace-req-1",
	} {
		if got := srv.Attr(k); got != want {
			t.Errorf("server span %s = %q, want %q", k, got, want)
		}
	}
	if srv.Name != "POST /v1/chat/completions" {
		t.Errorf("server span name %q", srv.Name)
	}
	fo := srv.Event("failover")
	if fo == nil {
		t.Fatal("no failover event on the server span")
	}
	if p, c, s, n := tracing.EventAttr(fo, "rolter.provider"), tracing.EventAttr(fo, "rolter.class"),
		tracing.EventAttr(fo, "http.response.status_code"), tracing.EventAttr(fo, "rolter.attempt"); p != "bad" || c != "server_error" || s != "500" || n != "2" {
		t.Errorf("failover event: provider %q class %q status %q attempt %q", p, c, s, n)
	}

	// Attempts: children of the server span, in order, each named by what
	// it did and where.
	if attempts[0].Attr("rolter.attempt") == "2" {
		attempts[0], attempts[1] = attempts[1], attempts[0]
	}
	for i, want := range []map[string]string{
		{"rolter.provider": "bad", "rolter.attempt": "1", "rolter.class": "server_error", "http.response.status_code": "500",
			"error.type": "server_error", "gen_ai.provider.name": "vllm", "gen_ai.request.model": "Qwen/Qwen3-8B", "server.address": "127.0.0.1"},
		{"rolter.provider": "good", "rolter.attempt": "2", "rolter.class": "ok", "http.response.status_code": "200",
			"gen_ai.response.model": "Qwen/Qwen3-8B", "gen_ai.usage.input_tokens": "12", "gen_ai.usage.output_tokens": "18"},
	} {
		s := attempts[i]
		if !bytesEqual(s.ParentSpanId, srv.SpanId) {
			t.Errorf("attempt %d's parent is not the server span", i+1)
		}
		for k, v := range want {
			if got := s.Attr(k); got != v {
				t.Errorf("attempt %d: %s = %q, want %q", i+1, k, got, v)
			}
		}
		if s.Name != "chat Qwen/Qwen3-8B" {
			t.Errorf("attempt %d name %q", i+1, s.Name)
		}
	}
	if attempts[0].Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || attempts[1].Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("attempt statuses %v, %v", attempts[0].Status, attempts[1].Status)
	}
	if attempts[1].Attr("error.type") != "" {
		t.Errorf("the successful attempt has error.type %q", attempts[1].Attr("error.type"))
	}

	// Each upstream saw its own attempt span as the parent, in the
	// client's trace.
	tps := seen.all()
	if len(tps) != 2 {
		t.Fatalf("%d upstream requests", len(tps))
	}
	for i, tp := range tps {
		want := "00-" + clientTraceID + "-" + hex.EncodeToString(attempts[i].SpanId) + "-01"
		if tp != want {
			t.Errorf("upstream %d got traceparent %q, want %q", i+1, tp, want)
		}
	}

	// Nothing secret or from the body: not the prompt, the client's key,
	// nor the pool key.
	for _, s := range spans {
		for _, v := range s.AllStrings() {
			testkit.AssertNoSecrets(t, "span "+s.Name, v, prompt, h.key, poolKey, "internal detail")
		}
	}
}

func TestTraceStreamFirstByte(t *testing.T) {
	h := newTracedHarness(t)
	var seen traceparents
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		seen.add(r)
		sseHeader(w)
		sseWrite(w, vllmStream...)
		if strings.Contains(string(body), `"include_usage":true`) {
			sseWrite(w, vllmUsageChunk)
		}
		sseWrite(w, "data: [DONE]\n\n")
	})
	pid := h.provider("vllm", up.base(), store.ProviderSettings{})
	h.route("qwen3", "", store.Target{ProviderID: pid, UpstreamModel: "Qwen/Qwen3-8B", Weight: 1})
	// No traceparent: the gateway starts the trace.
	resp := h.post("/v1/chat/completions", `{"model":"qwen3","stream":true,"messages":[]}`)
	if body := readAll(t, resp); resp.StatusCode != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	tps := seen.all()
	if len(tps) != 1 || len(tps[0]) != 55 {
		t.Fatalf("upstream traceparents %q", tps)
	}
	traceID := tps[0][3:35]
	spans := h.spans(traceID, 2)
	srv, att := byKind(spans, tracepb.Span_SPAN_KIND_SERVER), byKind(spans, tracepb.Span_SPAN_KIND_CLIENT)
	if len(srv) != 1 || len(att) != 1 {
		t.Fatalf("spans: %d server, %d attempt", len(srv), len(att))
	}
	if len(srv[0].ParentSpanId) != 0 {
		t.Errorf("a root request's server span has parent %x", srv[0].ParentSpanId)
	}
	if tps[0][36:52] != hex.EncodeToString(att[0].SpanId) {
		t.Errorf("upstream's parent %s, want the attempt span %x", tps[0][36:52], att[0].SpanId)
	}
	fb := att[0].Event("first_byte")
	if fb == nil {
		t.Fatal("no first_byte event on the attempt span")
	}
	if fb.TimeUnixNano < att[0].StartTimeUnixNano || fb.TimeUnixNano > att[0].EndTimeUnixNano {
		t.Errorf("first_byte at %d, outside the attempt %d..%d", fb.TimeUnixNano, att[0].StartTimeUnixNano, att[0].EndTimeUnixNano)
	}
	// The usage chunk the gateway asked for (and stripped) gives the tokens.
	for _, s := range []tracing.Span{srv[0], att[0]} {
		if s.Attr("gen_ai.usage.input_tokens") != "7" || s.Attr("gen_ai.usage.output_tokens") != "3" || s.Attr("gen_ai.response.model") != "Qwen/Qwen3-8B" {
			t.Errorf("%s: tokens %q/%q, response model %q", s.Name, s.Attr("gen_ai.usage.input_tokens"), s.Attr("gen_ai.usage.output_tokens"), s.Attr("gen_ai.response.model"))
		}
	}
	if srv[0].Attr("rolter.stream") != "true" {
		t.Errorf("server span rolter.stream = %q", srv[0].Attr("rolter.stream"))
	}
}

// A refusal at the gateway (no upstream) is a server span with its status,
// named by the matched route; a 5xx marks the span as an error.
func TestTraceGatewayErrors(t *testing.T) {
	h := newTracedHarness(t)
	resp := h.post("/v1/chat/completions", `{"model":"nosuch"}`, "Traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-01")
	readAll(t, resp)
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/v1/nowhere/at/all", nil)
	req.Header.Set("Traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-01")
	resp2, err := http.DefaultClient.Do(req)
	must(t, err)
	readAll(t, resp2)
	spans := h.spans(clientTraceID, 2)
	names := map[string]tracing.Span{}
	for _, s := range spans {
		names[s.Name] = s
	}
	s, ok := names["POST /v1/chat/completions"]
	if !ok || s.Attr("http.response.status_code") != "404" || s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR ||
		s.Attr("gen_ai.request.model") != "nosuch" {
		t.Errorf("unknown model span: %v %q", ok, s.AllStrings())
	}
	// A client-chosen path never names a span: the mux's pattern does.
	if _, ok := names["GET /v1/"]; !ok {
		t.Errorf("span names %v, want GET /v1/ for an unknown endpoint", spanNames(spans))
	}
}

// Without a tracer nothing is propagated: the upstream sees no
// traceparent, even one the client sent.
func TestTraceOffPropagatesNothing(t *testing.T) {
	h := newHarness(t, Config{})
	var seen traceparents
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		seen.add(r)
		_, _ = io.WriteString(w, vllmChatResponse)
	})
	pid := h.provider("p", up.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pid, Weight: 1})
	resp := h.post("/v1/chat/completions", `{"model":"m"}`, "Traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-01")
	if readAll(t, resp); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if tps := seen.all(); len(tps) != 1 || tps[0] != "" {
		t.Fatalf("upstream traceparents %q, want none", tps)
	}
	if h.gw.tracer != nil {
		t.Fatal("a gateway without Options.Tracer has a tracer")
	}
}

func TestHostPort(t *testing.T) {
	for base, want := range map[string]struct {
		host string
		port int
	}{
		"http://127.0.0.1:8000/v1":          {"127.0.0.1", 8000},
		"https://api.openai.com/v1":         {"api.openai.com", 0},
		"http://user:secret@vllm:8000/v1":   {"vllm", 8000},
		"http://[::1]:9000":                 {"::1", 9000},
		"https://[2001:db8::1]/v1?x=@other": {"2001:db8::1", 0},
		"no scheme":                         {"", 0},
	} {
		if h, p := hostPort(base); h != want.host || p != want.port {
			t.Errorf("hostPort(%q) = %q, %d; want %q, %d", base, h, p, want.host, want.port)
		}
	}
}

func spanNames(spans []tracing.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }
