package tracing

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/testkit"
)

func TestEnabled(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "false"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		if got := Enabled(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("Enabled(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}

// Without an endpoint Setup sets nothing up.
func TestSetupOffWithoutEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tp, stop, err := Setup(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if tp != nil || stop != nil || err != nil {
		t.Fatalf("Setup without an endpoint: %v, %v, %v", tp, stop != nil, err)
	}
}

// The SDK takes the endpoint, headers and service name from the
// environment; the log names the endpoint but neither its user
// information nor the headers.
func TestSetupExportsPerEnvironment(t *testing.T) {
	recv := &Receiver{Keep: true}
	coll := httptest.NewServer(recv)
	defer coll.Close()
	const token = "Bearer tok-FAKE-otlp-0123456789abcdef"
	url := strings.Replace(coll.URL, "http://", "http://user:pw-FAKE-secret@", 1)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization="+strings.ReplaceAll(token, " ", "%20"))
	t.Setenv("OTEL_SERVICE_NAME", "rolter-test")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	var logs testkit.Buffer
	tp, stop, err := Setup(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || tp == nil {
		t.Fatalf("Setup: %v", err)
	}
	_, span := tp.Tracer("test").Start(context.Background(), "one")
	span.End()
	if err := stop(context.Background()); err != nil { // flushes
		t.Fatal(err)
	}
	spans := recv.Spans()
	if len(spans) != 1 || spans[0].Name != "one" {
		t.Fatalf("received %d spans", len(spans))
	}
	if got := spans[0].ResourceAttr("service.name"); got != "rolter-test" {
		t.Errorf("service.name %q", got)
	}
	if got := spans[0].ResourceAttr("deployment.environment.name"); got != "test" {
		t.Errorf("deployment.environment.name %q", got)
	}
	if got := spans[0].ResourceAttr("service.version"); got == "" {
		t.Error("no service.version")
	}
	if h := recv.Headers(); len(h) != 1 || h[0].Get("Authorization") != token || h[0].Get("Content-Type") != "application/x-protobuf" {
		t.Errorf("export headers %v", h)
	}
	out := logs.String()
	if !strings.Contains(out, "OpenTelemetry traces on") || !strings.Contains(out, "endpoint="+coll.URL) || !strings.Contains(out, "grpc is ignored") {
		t.Errorf("log: %s", out)
	}
	testkit.AssertNoSecrets(t, "log", out, "pw-FAKE-secret", "tok-FAKE-otlp")
}

func TestReceiverRefusesGarbage(t *testing.T) {
	recv := &Receiver{}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/traces", "application/x-protobuf", strings.NewReader("\xff\xff not protobuf"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, _, bad := recv.Counts(); resp.StatusCode != 400 || bad != 1 {
		t.Fatalf("status %d, bad %d", resp.StatusCode, bad)
	}
}
