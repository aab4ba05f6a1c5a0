package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/rolter/rolter/internal/tracing"
)

// traceVia is the via of phases through the traced gateway (--trace): a
// second `rolter serve`, like the first but exporting every request's
// spans over OTLP/HTTP to a sink in the bench process.
const traceVia = "rolter+trace"

// TraceResult is one scenario through rolter with tracing off and on, from
// the same run: the cost of tracing every request.
type TraceResult struct {
	Scenario string  `json:"scenario"`
	OffCPU   float64 `json:"gateway_cpu_us_per_req_off"`
	OnCPU    float64 `json:"gateway_cpu_us_per_req_on"`
	Ratio    float64 `json:"on_to_off"`
	// SpansPerReq are the spans the sink received during the phase per
	// request sent (warm-up included): 2 when every request's server and
	// attempt spans arrived, less when the SDK's queue dropped some.
	SpansPerReq float64 `json:"spans_per_req"`
	OnPeakRSS   int64   `json:"gateway_peak_rss_bytes_on"`
}

// traceSink is an OTLP/HTTP receiver that counts what it gets and keeps
// nothing (tracing.Receiver): the collector a traced gateway exports to.
// It runs in the bench process, so decoding the exports is charged to
// the client's CPU, not the gateway's.
type traceSink struct {
	recv *tracing.Receiver
	srv  *http.Server
	url  string
}

func startTraceSink() (*traceSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &traceSink{recv: &tracing.Receiver{}, url: "http://" + ln.Addr().String()}
	s.srv = &http.Server{Handler: s.recv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *traceSink) close() { _ = s.srv.Close() }

func (s *traceSink) spans() int {
	_, n, _ := s.recv.Counts()
	return n
}

// traceEnv is the traced gateway's environment: the standard variables,
// with a batch delay under the bench's settle time, so that a phase's
// spans are exported (and their CPU charged) before its CPU is read.
func (s *traceSink) traceEnv() []string {
	return []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + s.url, "OTEL_SERVICE_NAME=rolter-bench", "OTEL_BSP_SCHEDULE_DELAY=500"}
}

// startTracedGateway starts the --trace gateway and its sink.
func (b *run) startTracedGateway(ctx context.Context, mockURL string) (*gatewayProc, *traceSink, error) {
	sink, err := startTraceSink()
	if err != nil {
		return nil, nil, err
	}
	gw, err := startGatewayEnv(ctx, sink.traceEnv(), b.opts.Exe, mockURL, b.opts.Routes, b.opts.PoolSize, b.opts.keyFields())
	if err != nil {
		sink.close()
		return nil, nil, err
	}
	return gw, sink, nil
}

// addTrace records scenario sc's traced phase against its untraced one.
func (r *Report) addTrace(sc string, spans int) error {
	off, on := r.phase(sc, "rolter"), r.phase(sc, traceVia)
	if off == nil || on == nil {
		return errors.New("trace: missing phase " + sc)
	}
	t := TraceResult{Scenario: sc, OffCPU: off.GatewayCPU, OnCPU: on.GatewayCPU, OnPeakRSS: on.GatewayPeakRSS}
	if off.GatewayCPU > 0 {
		t.Ratio = on.GatewayCPU / off.GatewayCPU
	}
	if sent := on.Requests + on.warmup; sent > 0 {
		t.SpansPerReq = float64(spans) / float64(sent)
	}
	r.Tracing = append(r.Tracing, t)
	return nil
}

// printTracing prints the --trace table.
func (r *Report) printTracing(w io.Writer) {
	if len(r.Tracing) == 0 {
		return
	}
	fmt.Fprintln(w, "tracing (--trace): gateway CPU per request, tracing off and on, same run")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\toff µs/req\ton µs/req\ton÷off\tspans/req\ton peak RSS MB\t")
	for _, t := range r.Tracing {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%.2f\t%s\t\n", t.Scenario, f1(t.OffCPU), f1(t.OnCPU), t.Ratio, t.SpansPerReq, mb(t.OnPeakRSS))
	}
	tw.Flush()
	fmt.Fprintln(w)
}
