// Package tracing sets up OpenTelemetry trace export for `rolter serve`:
// spans go over OTLP/HTTP to the collector the standard OTEL_* environment
// variables name. Without an endpoint nothing is set up, and the data path
// takes its untraced branch (package gateway, trace.go).
//
// The SDK reads its own variables: OTEL_EXPORTER_OTLP_ENDPOINT and
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_EXPORTER_OTLP_TIMEOUT, the TLS ones, OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER(_ARG) and OTEL_BSP_*. This
// package decides only whether tracing is on and names the service.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// ServiceName is service.name unless OTEL_SERVICE_NAME (or service.name in
// OTEL_RESOURCE_ATTRIBUTES) says otherwise.
const ServiceName = "rolter"

// Enabled reports whether the environment asks for trace export: an OTLP
// endpoint is set, and neither OTEL_SDK_DISABLED=true nor
// OTEL_TRACES_EXPORTER=none turns it off.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) != "" ||
		strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != ""
}

// Setup returns a tracer provider exporting over OTLP/HTTP in batches, and
// the function that flushes and stops it; both nil when Enabled is false.
// Export failures are logged at warn (the SDK retries, then drops).
func Setup(ctx context.Context, log *slog.Logger) (trace.TracerProvider, func(context.Context) error, error) {
	if !Enabled(os.Getenv) {
		return nil, nil, nil
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			if v == "grpc" {
				log.Warn("rolter exports traces over OTLP/HTTP only; "+k+"=grpc is ignored: point the endpoint at the collector's OTLP/HTTP port (4318)", "env", k)
			}
			break // the traces variable, when set, decides
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("OpenTelemetry trace exporter: %w", err)
	}
	// Attributes first, then the environment's, which override them.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(version())),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithSchemaURL(semconv.SchemaURL))
	if err != nil {
		// A malformed OTEL_RESOURCE_ATTRIBUTES: keep what parsed.
		log.Warn("OpenTelemetry resource is partial", "err", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("OpenTelemetry trace export failed", "err", err)
	}))
	// No sampler option: the SDK reads OTEL_TRACES_SAMPLER, by default
	// parentbased_always_on (a client's sampled flag is followed).
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	log.Info("OpenTelemetry traces on: exporting over OTLP/HTTP", "endpoint", endpointForLog())
	return tp, tp.Shutdown, nil
}

// endpointForLog is the endpoint as configured, without user information
// or query (either may hold a credential).
func endpointForLog() string {
	v := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	if v == "" {
		v = strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	if i := strings.IndexAny(v, "?#"); i >= 0 {
		v = v[:i]
	}
	if scheme, rest, ok := strings.Cut(v, "://"); ok {
		host, path := rest, ""
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			host, path = rest[:i], rest[i:]
		}
		if at := strings.LastIndexByte(host, '@'); at >= 0 {
			host = host[at+1:]
		}
		v = scheme + "://" + host + path
	}
	return v
}

// version is the main module's version from the build information.
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
