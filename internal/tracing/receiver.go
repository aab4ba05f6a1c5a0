package tracing

import (
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"

	collpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// MaxExport bounds one export request's body a Receiver reads.
const MaxExport = 32 << 20

// Receiver is an OTLP/HTTP trace receiver (POST /v1/traces, protobuf,
// optionally gzipped), as a collector answers: `rolter bench --trace`
// exports to one and counts what arrives, and tests keep and read the
// spans (Keep).
type Receiver struct {
	// Keep: keep every export's resource spans and headers, not only
	// counts.
	Keep bool

	mu      sync.Mutex
	exports int
	spans   int
	bad     int
	kept    []*tracepb.ResourceSpans
	headers []http.Header
}

var emptyResponse, _ = proto.Marshal(&collpb.ExportTraceServiceResponse{})

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = http.MaxBytesReader(w, r.Body, MaxExport)
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(body)
		if err != nil {
			rc.refuse(w, err)
			return
		}
		defer func() { _ = zr.Close() }()
		body = io.LimitReader(zr, MaxExport)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		rc.refuse(w, err)
		return
	}
	var req collpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		rc.refuse(w, err)
		return
	}
	n := 0
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			n += len(ss.Spans)
		}
	}
	rc.mu.Lock()
	rc.exports++
	rc.spans += n
	if rc.Keep {
		rc.kept = append(rc.kept, req.ResourceSpans...)
		rc.headers = append(rc.headers, r.Header.Clone())
	}
	rc.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(emptyResponse)
}

func (rc *Receiver) refuse(w http.ResponseWriter, err error) {
	rc.mu.Lock()
	rc.bad++
	rc.mu.Unlock()
	status := http.StatusBadRequest
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		status = http.StatusRequestEntityTooLarge
	}
	http.Error(w, "bad export: "+err.Error(), status)
}

// Counts are the exports and spans received, and the requests refused.
func (rc *Receiver) Counts() (exports, spans, bad int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.exports, rc.spans, rc.bad
}

// Spans are the spans kept (Keep), with their resources, in arrival
// order.
func (rc *Receiver) Spans() []Span {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []Span
	for _, rs := range rc.kept {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				out = append(out, Span{Span: s, Resource: rs.Resource.GetAttributes()})
			}
		}
	}
	return out
}

// Headers are the kept exports' request headers.
func (rc *Receiver) Headers() []http.Header {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]http.Header(nil), rc.headers...)
}

// Span is a received span with its resource's attributes.
type Span struct {
	*tracepb.Span
	Resource []*commonpb.KeyValue
}

// Attr is the span attribute key as a string ("" when absent); ints and
// bools are formatted.
func (s Span) Attr(key string) string { return attrOf(s.Attributes, key) }

// ResourceAttr is the resource attribute key as a string.
func (s Span) ResourceAttr(key string) string { return attrOf(s.Resource, key) }

// Event is the span's first event named name, or nil.
func (s Span) Event(name string) *tracepb.Span_Event {
	for _, e := range s.Events {
		if e.Name == name {
			return e
		}
	}
	return nil
}

// EventAttr is attribute key of event e as a string.
func EventAttr(e *tracepb.Span_Event, key string) string { return attrOf(e.GetAttributes(), key) }

func attrOf(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			return valueString(kv.Value)
		}
	}
	return ""
}

func valueString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return v.String()
}

// AllStrings are every attribute value of the span, its events and its
// resource, for checks that something never appears.
func (s Span) AllStrings() []string {
	var out []string
	add := func(kvs []*commonpb.KeyValue) {
		for _, kv := range kvs {
			out = append(out, kv.Key+"="+valueString(kv.Value))
		}
	}
	add(s.Attributes)
	add(s.Resource)
	for _, e := range s.Events {
		out = append(out, e.Name)
		add(e.Attributes)
	}
	return append(out, s.Name)
}
