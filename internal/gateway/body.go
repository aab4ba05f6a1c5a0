package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/rolter/rolter/internal/jsonscan"
	"github.com/rolter/rolter/internal/policy"
)

// requestBody is what one walk of a request body finds (scan): every span
// and fact the request path needs, so that parse, admit, the rate limit
// estimate, the usage option and each attempt's edits never walk the body
// again.
type requestBody struct {
	raw []byte
	// model is the first top-level "model" member's value span; a second
	// one is refused (decoders that keep the last would read another).
	modelStart, modelEnd int
	hasModel, dupModel   bool
	// stream: the first top-level "stream" member is true.
	stream, streamSeen bool
	// opts is the first top-level "stream_options" member's value span.
	optsStart, optsEnd int
	hasOpts            bool
	open               int // the object's '{'
	inspect            policy.Inspector
	// usage is the edit that asks the upstream for a usage chunk (see
	// usageEdit); nil: none.
	usage []byte
	// buf is the attempts' body, rebuilt in place for each one (splice).
	buf   []byte
	edits []jsonscan.Edit
	// bufSent tracks the copies of buf handed to a transport: buf is
	// rebuilt in place only once they are all written. It is set only by a
	// send of buf itself, so an attempt that sends the raw body in between
	// does not stand in for a transport still reading buf.
	bufSent *sentBody
	editBuf [4]jsonscan.Edit
	quoted  [96]byte // the upstream model, quoted, when it fits
}

// scan walks body once. The error is a *jsonscan.SyntaxError for a body
// that is not one valid JSON object.
func (rb *requestBody) scan(body []byte, endpoint string) error {
	*rb = requestBody{raw: body, open: jsonscan.SkipWS(body, 0)}
	rb.inspect.Reset(body, endpoint)
	return jsonscan.Walk(body, func(key []byte, v int) (int, error) {
		switch string(key) {
		case "model":
			end, err := jsonscan.SkipValue(body, v, 1)
			if rb.hasModel {
				rb.dupModel = true
			} else {
				rb.modelStart, rb.modelEnd, rb.hasModel = v, end, true
			}
			return end, err
		case "stream":
			end, err := jsonscan.SkipValue(body, v, 1)
			if !rb.streamSeen {
				rb.stream, rb.streamSeen = string(body[v:end]) == "true", true
			}
			return end, err
		case "stream_options":
			end, err := jsonscan.SkipValue(body, v, 1)
			if !rb.hasOpts {
				rb.optsStart, rb.optsEnd, rb.hasOpts = v, end, true
			}
			return end, err
		}
		return rb.inspect.Member(key, v)
	})
}

// model returns the model string: ok is false when absent, err is
// jsonscan.ErrNotString for a value that is not a string.
func (rb *requestBody) model() (string, bool, error) {
	if !rb.hasModel {
		return "", false, nil
	}
	if rb.raw[rb.modelStart] != '"' {
		return "", false, jsonscan.ErrNotString
	}
	var buf [64]byte
	return string(jsonscan.Unquoted(rb.raw, rb.modelStart, rb.modelEnd, buf[:0])), true, nil
}

// usageOption is inserted into streamed chat and completion requests whose
// client did not set stream_options, so the upstream reports token counts
// in a final chunk (which the relay then strips).
var usageOption = []byte(`"stream_options":{"include_usage":true},`)

// usageEdit makes a streamed chat or completion request ask the upstream
// for a usage chunk, so that tokens are counted (usage, limits, budgets)
// whatever the client set: a client that sends no stream_options, or
// include_usage false, must not stream for free. It reports whether the
// usage chunk is the gateway's own (the relay then strips it); the edit is
// made by splice.
func (rb *requestBody) usageEdit(endpoint string) bool {
	if endpoint != "/chat/completions" && endpoint != "/completions" {
		return false
	}
	if !rb.hasOpts {
		rb.usage = usageOption
		return true
	}
	// The client's own options, with include_usage set: its other options
	// (vLLM's continuous_usage_stats) are kept.
	opts := map[string]json.RawMessage{}
	if v := bytes.TrimSpace(rb.raw[rb.optsStart:rb.optsEnd]); string(v) != "null" && (json.Unmarshal(v, &opts) != nil || opts == nil) {
		return false // not an object: the upstream will refuse it
	}
	if string(bytes.TrimSpace(opts["include_usage"])) == "true" {
		return false // the client asked: it gets the chunk
	}
	opts["include_usage"] = json.RawMessage("true")
	merged, err := json.Marshal(opts)
	if err != nil {
		return false
	}
	rb.usage = merged
	return true
}

// splice is the body an attempt sends: the client's with every edit the
// attempt needs made in one pass, into a buffer reused across attempts:
// model (when the target's upstream model is not the client's), the
// target's output clamp, the usage option. The slice is good until the
// next splice.
//
// A transport may still read a request body after RoundTrip returns (an
// upstream that answered before it read the whole body), so the buffer is
// rebuilt in place only when the previous attempt's transport finished
// writing every copy of the body it was handed (sentBody); otherwise the
// next attempt gets a new buffer and the old one is left to the writer.
func (rb *requestBody) splice(model string, clamp *policy.Clamp) []byte {
	edits := rb.edits[:0]
	if edits == nil {
		edits = rb.editBuf[:0]
	}
	if rb.usage != nil {
		if rb.hasOpts {
			edits = append(edits, jsonscan.Edit{Start: rb.optsStart, End: rb.optsEnd, Value: rb.usage})
		} else {
			edits = append(edits, jsonscan.Edit{Start: rb.open + 1, End: rb.open + 1, Value: rb.usage})
		}
	}
	if clamp != nil {
		edits = clamp.Edits(edits)
	}
	if model != "" && rb.hasModel {
		quoted := jsonscan.AppendString(rb.quoted[:0], model)
		edits = append(edits, jsonscan.Edit{Start: rb.modelStart, End: rb.modelEnd, Value: quoted})
	}
	rb.edits = edits
	if len(edits) == 0 {
		return rb.raw
	}
	if rb.bufSent != nil && !rb.bufSent.done() {
		rb.buf = nil // left to the transport still reading it
	}
	rb.bufSent = nil
	rb.buf = jsonscan.Splice(rb.buf, rb.raw, edits)
	return rb.buf
}

// drop lets go of the request's bytes once no attempt will send them
// again (a stream past its first event): a long prompt is not held while
// its answer streams. A transport still writing a copy keeps its own.
func (rb *requestBody) drop() {
	*rb = requestBody{}
}

// sentBody tracks the copies of an attempt's body handed to the transport
// (the request's own and any GetBody made for a retry on a new connection)
// and the writes of it the transport finished (httptrace WroteRequest,
// called once a write has read all it will read of the body). After
// RoundTrip returned no new copy is made, so written == handed means no
// one reads the buffer any more.
type sentBody struct {
	handed, written atomic.Int32
	trace           httptrace.ClientTrace // allocated with the counters
}

func (s *sentBody) wrote(httptrace.WroteRequestInfo) { s.written.Add(1) }

func (s *sentBody) done() bool { return s.written.Load() >= s.handed.Load() }

// send prepares req's body from b and tracks it as the exchange's last
// sent body; ctx is the attempt's, with the trace that counts the writes.
func (rb *requestBody) send(ctx context.Context, b []byte) (context.Context, io.ReadCloser, func() (io.ReadCloser, error)) {
	s := &sentBody{}
	s.handed.Store(1)
	if len(b) > 0 && len(rb.buf) > 0 && &b[0] == &rb.buf[0] {
		rb.bufSent = s
	}
	s.trace.WroteRequest = s.wrote
	ctx = httptrace.WithClientTrace(ctx, &s.trace)
	getBody := func() (io.ReadCloser, error) {
		s.handed.Add(1)
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	return ctx, io.NopCloser(bytes.NewReader(b)), getBody
}
