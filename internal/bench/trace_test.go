package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The --trace sink is a working OTLP/HTTP endpoint for the SDK's exporter,
// configured as the traced gateway's environment configures it.
func TestTraceSinkCountsExportedSpans(t *testing.T) {
	sink, err := startTraceSink()
	if err != nil {
		t.Fatal(err)
	}
	defer sink.close()
	env := strings.Join(sink.traceEnv(), " ")
	if !strings.Contains(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+sink.url) {
		t.Fatalf("env %s", env)
	}
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(sink.url+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	for range 3 {
		_, s := tp.Tracer("bench").Start(context.Background(), "x")
		s.End()
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := sink.spans(); n != 3 {
		t.Fatalf("sink counted %d spans, want 3", n)
	}
}

func TestAddTraceRatios(t *testing.T) {
	r := &Report{Phases: []Phase{
		{Scenario: "chat-c1", Via: "rolter", GatewayCPU: 200},
		{Scenario: "chat-c1", Via: traceVia, GatewayCPU: 250, Requests: 900, warmup: 100},
	}}
	if err := r.addTrace("chat-c1", 2000); err != nil {
		t.Fatal(err)
	}
	if got := r.Tracing[0]; got.Ratio != 1.25 || got.SpansPerReq != 2 || got.OffCPU != 200 || got.OnCPU != 250 {
		t.Fatalf("%+v", got)
	}
	if err := r.addTrace("stream-c1", 0); err == nil {
		t.Fatal("a scenario without phases was recorded")
	}
	var out bytes.Buffer
	r.printTracing(&out)
	if !strings.Contains(out.String(), "1.25") {
		t.Fatalf("printed: %s", out.String())
	}
}
