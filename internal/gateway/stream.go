package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/rolter/rolter/internal/jsonscan"
	"github.com/rolter/rolter/internal/sse"
)

// relay streams an SSE response event by event. The first event is read
// before anything is sent, so an upstream that fails before producing one
// can still fail over; after that every event is written and flushed as it
// arrives, with only its model value rewritten.
func (g *Gateway) relay(w http.ResponseWriter, r *http.Request, x *exchange, ctx context.Context, resp *http.Response, wd *watchdog) result {
	rd := sse.NewReader(resp.Body, 0)
	ev, err := rd.Next()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return result{class: ClassServer, status: resp.StatusCode} // 200 with an empty stream
		}
		return result{class: classifyErr(err, ctx, r.Context())}
	}
	wd.progress()
	x.ttft = time.Since(x.start)
	if ev.Data != nil {
		if m, ok, _ := jsonscan.Get(ev.Data); ok && m != "" {
			x.upstreamModel = capModel(m)
		}
	}
	h := w.Header()
	copyResponseHeaders(h, resp.Header)
	h.Set("X-Rolter-Upstream-Model", x.upstreamModel)
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
			if x.usageChunk(ev.Data, nested) {
				goto next // asked for by us, not by the client
			}
			buf = rewriteEvent(buf[:0], ev, x.model, nested)
			out = buf
		}
		if _, err := w.Write(out); err != nil {
			return result{class: ClassClientCancelled, status: resp.StatusCode, committed: true}
		}
		// Flush when no further event is already waiting: events that came
		// together leave in one write, and none waits for a later one.
		if !rd.Ready() {
			if err := rc.Flush(); err != nil {
				return result{class: ClassClientCancelled, status: resp.StatusCode, committed: true}
			}
		}
		if ev.IsDone() {
			return result{status: resp.StatusCode, committed: true}
		}
	next:
		ev, err = rd.Next()
		if err == nil {
			wd.progress()
			continue
		}
		if errors.Is(err, io.EOF) && nested != "" {
			return result{status: resp.StatusCode, committed: true} // these streams end without [DONE]
		}
		cls := classifyErr(err, ctx, r.Context())
		if cls == ClassClientCancelled {
			return result{class: cls, status: resp.StatusCode, committed: true}
		}
		if cls != ClassIdleTimeout {
			cls = ClassStreamBroken
		}
		msg := "the upstream stream broke before it finished"
		if cls == ClassIdleTimeout {
			msg = "the upstream sent no event within the idle timeout"
		}
		_, _ = w.Write(x.streamError(verdicts[cls].clientCode, msg))
		_ = rc.Flush()
		return result{class: cls, status: resp.StatusCode, committed: true}
	}
}

// usageChunk records token counts from a chunk carrying usage and reports
// whether the chunk exists only because the gateway asked for it (no
// choices, usage added by us), in which case it is not relayed. Responses
// API events carry usage inside "response".
func (x *exchange) usageChunk(data []byte, nested string) bool {
	if !bytes.Contains(data, []byte(`"usage"`)) {
		return false // the common chunk: no scan
	}
	if nested != "" {
		if s, e, found, err := jsonscan.LocateKey(data, nested); err == nil && found && data[s] == '{' {
			data = data[s:e]
		}
	}
	s, _, found, err := jsonscan.LocateKey(data, "usage")
	if err != nil || !found || data[s] != '{' {
		return false
	}
	// Messages streams report input tokens first and output tokens last.
	if p, c := usageOf(data); p > 0 || c > 0 {
		x.promptTokens = max(x.promptTokens, p)
		x.outputTokens = max(x.outputTokens, c)
	}
	if !x.addedUsage {
		return false
	}
	cs, ce, found, _ := jsonscan.LocateKey(data, "choices")
	return found && string(data[cs:ce]) == "[]"
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
