package gateway

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// OpenTelemetry traces of the client API (issue 20 §3).
//
// With Options.Tracer set, every /v1 request gets a server span, named
// "METHOD route" ("POST /v1/chat/completions"), whose parent is the
// client's W3C traceparent when it sent one; every upstream attempt gets a
// child client span, and the upstream request carries that span's
// traceparent. The server span gets a "failover" event before each attempt
// after the first; an attempt span whose stream produced its first event
// gets a "first_byte" event at that moment. Attributes are the GenAI and
// HTTP semantic conventions plus rolter.* ones; none holds a credential, a
// header or a body.
//
// Without a tracer (no OTLP endpoint: the default) the request path checks
// one nil pointer per step and does nothing else: no span, no context, no
// propagation, no allocation.

// Span attributes of rolter's own, beside the semantic conventions.
const (
	attrRequestID = attribute.Key("rolter.request_id")
	attrOrg       = attribute.Key("rolter.org")
	attrProject   = attribute.Key("rolter.project")
	attrRoute     = attribute.Key("rolter.route")
	attrProvider  = attribute.Key("rolter.provider") // the provider's slug
	attrClass     = attribute.Key("rolter.class")    // failure class, "ok" for an attempt that succeeded
	attrAttempt   = attribute.Key("rolter.attempt")  // 1 for the first attempt
	attrAttempts  = attribute.Key("rolter.attempts")
	attrStream    = attribute.Key("rolter.stream")
)

// Span event names.
const (
	eventFailover  = "failover"
	eventFirstByte = "first_byte"
)

// tracerName is the instrumentation scope of the gateway's spans.
const tracerName = "github.com/rolter/rolter/internal/gateway"

var traceContext propagation.TraceContext

// reqTrace is one traced request: its server span and the running
// attempt's span. It lives on the request's goroutine only.
type reqTrace struct {
	tracer trace.Tracer
	ctx    context.Context // carries the server span
	span   trace.Span
	// x is the request's exchange, once serve has one; nil for the
	// endpoints without (models, not found).
	x       *exchange
	attempt trace.Span // the running attempt's; nil between attempts
	attCtx  context.Context
	// prev is how the last attempt ended, for the failover event.
	prevProvider string
	prevClass    Class
	prevStatus   int
}

type traceKey struct{}

// serveTraced is ServeHTTP with a server span around the request.
func (g *Gateway) serveTraced(w http.ResponseWriter, r *http.Request) {
	ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLScheme(scheme(r))}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		attrs = append(attrs, semconv.ClientAddress(host))
	}
	if id := w.Header().Get(HeaderRequestID); id != "" {
		attrs = append(attrs, attrRequestID.String(id))
	}
	ctx, span := g.tracer.Start(ctx, r.Method+" /v1", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	tr := &reqTrace{tracer: g.tracer, ctx: ctx, span: span}
	sw := &statusWriter{ResponseWriter: w}
	r = r.WithContext(context.WithValue(ctx, traceKey{}, tr))
	defer tr.end(r, sw)
	g.mux.ServeHTTP(sw, r)
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// traceOf is the request's trace, bound to x; call it only when tracing.
func traceOf(r *http.Request, x *exchange) *reqTrace {
	tr, _ := r.Context().Value(traceKey{}).(*reqTrace)
	if tr != nil {
		tr.x = x
	}
	return tr
}

// end names the server span by the route the mux matched, records the
// answer and what the exchange learned, and ends it.
func (tr *reqTrace) end(r *http.Request, sw *statusWriter) {
	route := r.Pattern
	if _, path, ok := strings.Cut(route, " "); ok {
		route = path
	}
	if route == "" {
		route = "/v1/"
	}
	s := tr.span
	s.SetName(r.Method + " " + route)
	status := sw.status
	if status == 0 {
		status = http.StatusOK // net/http's answer to a handler that wrote nothing
	}
	s.SetAttributes(semconv.HTTPRoute(route), semconv.HTTPResponseStatusCode(status))
	failed := ""
	if status >= 500 {
		failed = strconv.Itoa(status)
	}
	if x := tr.x; x != nil {
		attrs := make([]attribute.KeyValue, 0, 12)
		if op := operationOf(x.endpoint); op.Valid() {
			attrs = append(attrs, op)
		}
		if x.model != "" {
			attrs = append(attrs, semconv.GenAIRequestModel(x.model))
		}
		if x.key != nil && x.key.Project != nil {
			attrs = append(attrs, attrProject.String(x.key.Project.Name))
			if x.key.Project.Org != nil {
				attrs = append(attrs, attrOrg.String(x.key.Project.Org.Name))
			}
		}
		if x.origin != nil { // the caller's route, also when a fallback served
			attrs = append(attrs, attrRoute.String(x.origin.route))
		} else if x.plan != nil {
			attrs = append(attrs, attrRoute.String(x.plan.route))
		}
		if x.target != nil {
			attrs = append(attrs, attrProvider.String(x.target.provider.slug))
		}
		if x.attempts > 0 {
			attrs = append(attrs, attrAttempts.Int(x.attempts))
		}
		if x.stream {
			attrs = append(attrs, attrStream.Bool(true))
		}
		if x.upstreamModel != "" && x.status < 400 {
			attrs = append(attrs, semconv.GenAIResponseModel(x.upstreamModel))
		}
		attrs = appendTokens(attrs, x.promptTokens, x.outputTokens)
		if failure(x.class) {
			// A stream cut after its 200 is a failure the status misses.
			attrs = append(attrs, attrClass.String(string(x.class)))
			failed = string(x.class)
		}
		s.SetAttributes(attrs...)
	}
	if failed != "" {
		s.SetAttributes(semconv.ErrorTypeKey.String(failed))
		s.SetStatus(codes.Error, failed)
	}
	s.End()
}

// failure reports whether c is an upstream or gateway failure, as opposed
// to success or the caller's own error relayed.
func failure(c Class) bool { return c != ClassNone && c != ClassCaller }

func appendTokens(attrs []attribute.KeyValue, in, out int) []attribute.KeyValue {
	if in > 0 {
		attrs = append(attrs, semconv.GenAIUsageInputTokens(in))
	}
	if out > 0 {
		attrs = append(attrs, semconv.GenAIUsageOutputTokens(out))
	}
	return attrs
}

// operationOf is gen_ai.operation.name for a client endpoint; invalid (no
// attribute) for count_tokens, which generates nothing.
func operationOf(endpoint string) attribute.KeyValue {
	switch endpoint {
	case "/chat/completions", "/responses", "/messages":
		return semconv.GenAIOperationNameChat
	case "/completions":
		return semconv.GenAIOperationNameTextCompletion
	case "/embeddings":
		return semconv.GenAIOperationNameEmbeddings
	}
	return attribute.KeyValue{}
}

// providerName is gen_ai.provider.name for a provider kind: the
// convention's value where it has one ("openai", "anthropic"), else the
// kind ("vllm", "sglang", "llamacpp").
func providerName(kind string) attribute.KeyValue {
	if kind == "" {
		kind = "openai"
	}
	return semconv.GenAIProviderNameKey.String(kind)
}

// startAttempt opens attempt x.attempts's span on target tg, after a
// failover event on the server span when it is not the first.
func (tr *reqTrace) startAttempt(x *exchange, tg *targetRT) {
	p := tg.provider
	if x.attempts > 1 {
		ev := []attribute.KeyValue{attrAttempt.Int(x.attempts), attrProvider.String(tr.prevProvider), attrClass.String(string(tr.prevClass))}
		if tr.prevStatus != 0 {
			ev = append(ev, semconv.HTTPResponseStatusCode(tr.prevStatus))
		}
		tr.span.AddEvent(eventFailover, trace.WithAttributes(ev...))
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, attrProvider.String(p.slug), providerName(p.kind), attrAttempt.Int(x.attempts), semconv.HTTPRequestMethodPost)
	if op := operationOf(x.endpoint); op.Valid() {
		attrs = append(attrs, op)
	}
	if host, port := hostPort(p.base); host != "" {
		attrs = append(attrs, semconv.ServerAddress(host))
		if port > 0 {
			attrs = append(attrs, semconv.ServerPort(port))
		}
	}
	tr.attCtx, tr.attempt = tr.tracer.Start(tr.ctx, "upstream "+p.slug, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// inject sets the running attempt's traceparent (and tracestate) on an
// upstream request's headers, replacing any the client sent.
func (tr *reqTrace) inject(h http.Header) {
	if tr.attCtx != nil {
		traceContext.Inject(tr.attCtx, propagation.HeaderCarrier(h))
	}
}

// endAttempt records how the running attempt ended and ends its span.
func (tr *reqTrace) endAttempt(x *exchange, o outcome) {
	s := tr.attempt
	if s == nil {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, attrClass.String(attemptLabel(o.class)))
	if o.status != 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCode(o.status))
	}
	if o.model != "" {
		sent := capModel(o.model)
		attrs = append(attrs, semconv.GenAIRequestModel(sent))
		if op := operationOf(x.endpoint); op.Valid() {
			s.SetName(op.Value.AsString() + " " + sent)
		}
	}
	if o.upstreamModel != "" && !failure(o.class) {
		attrs = append(attrs, semconv.GenAIResponseModel(o.upstreamModel))
	}
	attrs = appendTokens(attrs, o.promptTokens, o.outputTokens)
	if o.ttft > 0 {
		s.AddEvent(eventFirstByte, trace.WithTimestamp(x.start.Add(o.ttft)))
	}
	if failure(o.class) {
		attrs = append(attrs, semconv.ErrorTypeKey.String(string(o.class)))
		s.SetStatus(codes.Error, string(o.class))
	}
	s.SetAttributes(attrs...)
	s.End()
	tr.prevProvider, tr.prevClass, tr.prevStatus = x.target.provider.slug, o.class, o.status
	tr.attempt, tr.attCtx = nil, nil
}

// hostPort is the host and port of a base URL ("http://user@h:8000/v1"
// gives "h", 8000), without user information; port 0 when not written.
func hostPort(base string) (string, int) {
	_, rest, ok := strings.Cut(base, "://")
	if !ok {
		return "", 0
	}
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		rest = rest[:i]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = rest[at+1:]
	}
	host, p, err := net.SplitHostPort(rest)
	if err != nil {
		return strings.Trim(rest, "[]"), 0
	}
	port, _ := strconv.Atoi(p)
	return host, port
}

// statusWriter remembers the status of the answer, for the server span.
// Flushes and deadlines reach the connection through Unwrap
// (http.ResponseController).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
