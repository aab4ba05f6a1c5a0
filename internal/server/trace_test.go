package server_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/testkit"
	"github.com/rolter/rolter/internal/tracing"
)

// TestTracesFromEnvironment: `rolter serve` with OTEL_EXPORTER_OTLP_ENDPOINT
// exports the data path's spans to that collector, and sends the last ones
// at shutdown.
func TestTracesFromEnvironment(t *testing.T) {
	recv := &tracing.Receiver{Keep: true}
	coll := httptest.NewServer(recv)
	defer coll.Close()
	const header = "tok-FAKE-collector-0123456789abcdef"
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", coll.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-api-key="+header)
	t.Setenv("OTEL_SERVICE_NAME", "")
	r := start(t, server.Config{DataDir: t.TempDir(), Demo: true})
	key := keyRe.FindStringSubmatch(r.out.String())[1]
	code, body := r.call(t, "POST", "/v1/chat/completions", key, `{"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if code != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("stream: %d %s", code, body)
	}
	if err := r.srv.Shutdown(); err != nil { // flushes the batch
		t.Fatal(err)
	}
	var srvSpan, attempt *tracing.Span
	for _, s := range recv.Spans() {
		switch {
		case s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.Name == "POST /v1/chat/completions":
			srvSpan = &s
		case s.Kind == tracepb.Span_SPAN_KIND_CLIENT:
			attempt = &s
		}
	}
	if srvSpan == nil || attempt == nil {
		t.Fatalf("spans at the collector: %d, no server or attempt span", len(recv.Spans()))
	}
	if srvSpan.ResourceAttr("service.name") != "rolter" || srvSpan.Attr("rolter.provider") != "demo" ||
		attempt.Attr("rolter.provider") != "demo" || attempt.Event("first_byte") == nil {
		t.Errorf("server span %v; attempt span %v", srvSpan.AllStrings(), attempt.AllStrings())
	}
	if string(attempt.ParentSpanId) != string(srvSpan.SpanId) {
		t.Error("the attempt span is not the server span's child")
	}
	if h := recv.Headers(); len(h) == 0 || h[0].Get("X-Api-Key") != header {
		t.Errorf("export headers %v", h)
	}
	testkit.AssertNoSecrets(t, "log", r.logs.String(), header, key)
	if !strings.Contains(r.logs.String(), "OpenTelemetry traces on") {
		t.Errorf("no start-up line: %s", r.logs.String())
	}
}
