package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/rolter/rolter/internal/jsonscan"
	"github.com/rolter/rolter/internal/sse"
)

// relay streams an SSE response event by event, for passThrough. The first
// event is read before anything is sent, so an upstream that fails before
// producing one can still fail over; after that every event is written and
// flushed as it arrives, with only its model value rewritten.
func relay(ctx context.Context, c call) outcome {
	w, r, x, resp := c.w, c.r, c.x, c.resp
	o := c.outcome(result{})
	rd := sse.NewReader(resp.Body, 0)
	ev, err := rd.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return o.with(result{class: ClassServer, status: resp.StatusCode, err: errEmpty}) // 200 with an empty stream
		}
		return o.with(result{class: classifyErr(err, ctx, r.Context()), err: fmt.Errorf("read the stream: %w", attemptErr(err, ctx))})
	}
	c.wd.progress()
	o.ttft = time.Since(x.start)
	if ev.Data != nil {
		if m, ok, _ := jsonscan.Get(ev.Data); ok && m != "" {
			o.upstreamModel = capModel(m)
		}
	}
	h := w.Header()
	copyResponseHeaders(h, resp.Header)
	h.Set("X-Rolter-Upstream-Model", o.upstreamModel)
	h.Set("X-Accel-Buffering", "no") // tell buffering proxies in front of us to pass events through
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	// Responses and Messages events carry the model (and usage) inside an
	// object: "response" and "message" (message_start).
	nested := ""
	switch x.endpoint {
	case "/responses":
		nested = "response"
	case "/messages":
		nested = "message"
	}
	var buf []byte
	for {
		out := ev.Raw
		switch {
		case ev.IsDone():
		case ev.Data != nil && ev.DataOffset >= 0:
			var drop bool
			if buf, drop = x.relayEvent(buf[:0], ev, nested, &o); drop {
				goto next // asked for by us, not by the client
			}
			out = buf
		}
		if _, err := w.Write(out); err != nil {
			return o.with(result{class: ClassClientCancelled, status: resp.StatusCode, committed: true, err: fmt.Errorf("write to the client: %w", err)})
		}
		// Flush when no further event is already waiting: events that came
		// together leave in one write, and none waits for a later one.
		if !rd.Ready() {
			if err := rc.Flush(); err != nil {
				return o.with(result{class: ClassClientCancelled, status: resp.StatusCode, committed: true, err: fmt.Errorf("write to the client: %w", err)})
			}
		}
		if ev.IsDone() {
			return o.with(result{status: resp.StatusCode, committed: true})
		}
	next:
		ev, err = rd.Next()
		if err == nil {
			c.wd.progress()
			continue
		}
		if errors.Is(err, io.EOF) && nested != "" {
			return o.with(result{status: resp.StatusCode, committed: true}) // these streams end without [DONE]
		}
		cls := midStream(classifyErr(err, ctx, r.Context()))
		x.endStream(w, rc, cls)
		return o.with(result{class: cls, status: resp.StatusCode, committed: true, err: fmt.Errorf("read the stream: %w", attemptErr(err, ctx))})
	}
}

// relayEvent appends ev.Raw to dst with the model value of its data line
// replaced by the client's; drop reports a usage chunk that exists only
// because the gateway asked for it (no choices, usage added by us), which
// is not relayed. Token counts are recorded in o from any chunk carrying
// usage.
// Responses and Messages events carry model and usage inside nested
// ("response", "message"). A chunk without usage is scanned only up to its
// model; one with usage once for model, usage and choices.
func (x *exchange) relayEvent(dst []byte, ev sse.Event, nested string, o *outcome) (out []byte, drop bool) {
	if !bytes.Contains(ev.Data, []byte(`"usage"`)) {
		return rewriteEvent(dst, ev, x.model, nested), false // the common chunk
	}
	sp := scanEvent(ev.Data, nested)
	if sp.usageChunk(o, x.addedUsage) {
		return dst, true
	}
	return sp.rewrite(dst, ev, x.model), false
}

// eventSpans is one scan of an event's data: the spans, within data, of the
// first "model", "usage" and "choices" members of the object the relay
// reads (data, or its nested member).
type eventSpans struct {
	data                  []byte
	nestedMissing         bool // nested was asked for and is not an object
	model, usage, choices [2]int
}

var eventKeys = []string{"model", "usage", "choices"}

func scanEvent(data []byte, nested string) eventSpans {
	e := eventSpans{data: data}
	base, obj := 0, data
	if nested != "" {
		s, end, found, err := jsonscan.LocateKey(data, nested)
		if err == nil && found && data[s] == '{' {
			base, obj = s, data[s:end]
		} else {
			e.nestedMissing = true // usage is still looked for at the top
		}
	}
	var sp [3][2]int
	_ = jsonscan.LocateAll(obj, eventKeys, sp[:]) // a span is set only where it was well-formed
	for k := range sp {
		if sp[k][0] >= 0 {
			sp[k][0] += base
			sp[k][1] += base
		}
	}
	e.model, e.usage, e.choices = sp[0], sp[1], sp[2]
	return e
}

// usageChunk records token counts from a chunk carrying usage in o and
// reports whether the chunk is the gateway's own (added: the gateway asked
// for usage the client did not).
func (e *eventSpans) usageChunk(o *outcome, added bool) bool {
	if e.usage[0] < 0 || e.data[e.usage[0]] != '{' {
		return false
	}
	// Messages streams report input tokens first and output tokens last.
	if p, c := usageIn(e.data[e.usage[0]:e.usage[1]]); p > 0 || c > 0 {
		o.promptTokens = max(o.promptTokens, p)
		o.outputTokens = max(o.outputTokens, c)
	}
	if !added {
		return false
	}
	return e.choices[0] >= 0 && string(e.data[e.choices[0]:e.choices[1]]) == "[]"
}

// rewrite appends ev.Raw to dst with the model value replaced by model.
func (e *eventSpans) rewrite(dst []byte, ev sse.Event, model string) []byte {
	if e.nestedMissing || e.model[0] < 0 {
		return append(dst, ev.Raw...)
	}
	dst = append(dst, ev.Raw[:ev.DataOffset+e.model[0]]...)
	dst = jsonscan.AppendString(dst, model)
	return append(dst, ev.Raw[ev.DataOffset+e.model[1]:]...)
}

// rewriteEvent appends ev.Raw to dst with the model value of its data line
// replaced by model. Nothing else in the event changes.
func rewriteEvent(dst []byte, ev sse.Event, model string, nested string) []byte {
	data := ev.Data
	base := ev.DataOffset
	if nested != "" {
		s, e, found, err := jsonscan.LocateKey(data, nested)
		if err != nil || !found || data[s] != '{' {
			return append(dst, ev.Raw...)
		}
		base += s
		data = data[s:e]
	}
	s, e, found, err := jsonscan.Locate(data)
	if err != nil || !found {
		return append(dst, ev.Raw...)
	}
	dst = append(dst, ev.Raw[:base+s]...)
	dst = jsonscan.AppendString(dst, model)
	return append(dst, ev.Raw[base+e:]...)
}
