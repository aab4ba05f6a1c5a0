package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/rolter/rolter/internal/jsonscan"
	"github.com/rolter/rolter/internal/sse"
)

// relay streams an SSE response event by event, for passThrough. The first
// event is read before anything is sent, so an upstream that fails before
// producing one can still fail over; after that every event is written and
// flushed as it arrives, with only its model value rewritten.
//
// Once the first event is in, relay sends the response's headers and
// returns the rest of the stream as the outcome's tail: the request's
// goroutine relays it from serve (finishStream), in a shallow frame. A
// parked goroutine's stack is halved at a collection only when less than a
// quarter of it is in use, and the path from serve down to here is deeper
// than that: waiting for events here kept every idle stream's 16 KiB stack
// (issue 21).
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
	t := &streamTail{ctx: ctx, x: x, w: w, r: r, wd: c.wd, rc: http.NewResponseController(w),
		body: resp.Body, status: resp.StatusCode, rd: rd, ev: ev}
	// Responses and Messages events carry the model (and usage) inside an
	// object: "response" and "message" (message_start).
	switch x.endpoint {
	case "/responses":
		t.nested = "response"
	case "/messages":
		t.nested = "message"
	}
	t.o = o // what the attempt learned so far: the upstream's model, ttft
	// No attempt follows: the request's body is not needed any more.
	x.body.drop()
	x.translated = nil
	o.tail = t
	return o
}

// streamTail is a stream whose headers are sent and whose first event is
// read: what relaying the rest of it takes, and how the attempt that
// opened it ends. It belongs to the request's goroutine.
type streamTail struct {
	// ctx is the attempt's context, kept with the stream it cancels: the
	// watchdog, a drain cut and the client's leaving end the stream's
	// reads through it.
	ctx    context.Context
	x      *exchange
	w      http.ResponseWriter // the client, through its clientWriter
	r      *http.Request
	wd     *watchdog
	rc     *http.ResponseController
	body   io.ReadCloser // the upstream's
	status int
	rd     *sse.Reader
	ev     sse.Event // read, not yet relayed
	nested string
	buf    *[]byte // a rewritten event (tailBufs); given back while the stream waits
	o      outcome
	// Set by attempt and forwardPlan: the rest of the attempt's ending.
	model string     // the model sent upstream
	end   attemptEnd // the attempt's cleanup (attempt); zero once run
	att   attemptRec
}

// tailBufs recycle the buffers events are rewritten in, so that a stream
// holds none while it waits.
var tailBufs = sync.Pool{New: func() any { return new([]byte) }}

// run relays the rest of the stream, leaving the attempt's outcome in
// t.o. Between events it waits with nothing but this frame and next's
// above serve's.
func (t *streamTail) run() {
	for {
		if t.send() || t.next() {
			return
		}
	}
}

// send writes the event read, rewritten, and flushes when no further event
// is already waiting: events that came together leave in one write, and
// none waits for a later one. It reports whether the stream ended.
//
//go:noinline
func (t *streamTail) send() (done bool) {
	ev := t.ev
	t.ev = sse.Event{}
	out, drop := ev.Raw, false
	switch {
	case ev.IsDone():
	case ev.Data != nil && ev.DataOffset >= 0:
		if t.buf == nil {
			t.buf = tailBufs.Get().(*[]byte)
		}
		// drop: a usage chunk asked for by us, not by the client. An
		// event written before it may still wait in the buffer: the
		// flush below still runs, or it would wait for the next event.
		*t.buf, drop = t.x.relayEvent((*t.buf)[:0], ev, t.nested, &t.o)
		out = *t.buf
	}
	if !drop {
		if _, err := t.w.Write(out); err != nil {
			t.o = t.o.with(result{class: ClassClientCancelled, status: t.status, committed: true, err: fmt.Errorf("write to the client: %w", err)})
			return true
		}
	}
	if !t.rd.Ready() {
		if err := t.rc.Flush(); err != nil {
			t.o = t.o.with(result{class: ClassClientCancelled, status: t.status, committed: true, err: fmt.Errorf("write to the client: %w", err)})
			return true
		}
	}
	if ev.IsDone() {
		t.o = t.o.with(result{status: t.status, committed: true})
		return true
	}
	return false
}

// next reads the next event, first waiting for the upstream, when none is
// buffered, with no buffer held. It reports whether the stream ended.
func (t *streamTail) next() (done bool) {
	if !t.rd.Ready() {
		t.rd.Release()
		t.putBuf()
		if wt, ok := t.body.(interface{ Wait() }); ok {
			wt.Wait() // h1client: no read buffer held while waiting
		}
	}
	return t.read()
}

//go:noinline
func (t *streamTail) read() (done bool) {
	ev, err := t.rd.Next()
	if err == nil {
		t.wd.progress()
		t.ev = ev
		return false
	}
	if errors.Is(err, io.EOF) && t.nested != "" {
		t.o = t.o.with(result{status: t.status, committed: true}) // these streams end without [DONE]
		return true
	}
	cls := midStream(classifyErr(err, t.ctx, t.r.Context()))
	t.x.endStream(t.w, t.rc, cls)
	t.o = t.o.with(result{class: cls, status: t.status, committed: true, err: fmt.Errorf("read the stream: %w", attemptErr(err, t.ctx))})
	return true
}

// putBuf gives the rewrite buffer back; one grown past an ordinary event
// is left to the collector.
func (t *streamTail) putBuf() {
	if t.buf != nil {
		if cap(*t.buf) <= 16<<10 {
			tailBufs.Put(t.buf)
		}
		t.buf = nil
	}
}

// close ends the attempt's hold on the upstream (its body, context,
// watchdog), once the stream is relayed or abandoned.
func (t *streamTail) close() {
	t.putBuf()
	_ = t.body.Close()
	if t.end.cancel != nil {
		t.end.run()
		t.end = attemptEnd{}
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
