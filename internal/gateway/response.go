package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/rolter/rolter/internal/jsonscan"
)

// bodyBufs recycles the buffers a non-streamed answer is read into and
// rewritten in: every request would otherwise allocate (and the collector
// mark and clear) one or two buffers the size of the answer, the largest
// of its allocations. The pairings' respond write the answer before they
// return and keep no part of it. Buffers that grew past maxPooledBody are
// dropped, so one huge answer does not stay pinned.
var bodyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBody = 64 << 10

func getBodyBuf() *bytes.Buffer { return bodyBufs.Get().(*bytes.Buffer) }

func putBodyBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooledBody {
		b.Reset()
		bodyBufs.Put(b)
	}
}

// respond reads a non-streamed answer whole (bounded) and scans it once,
// then pr answers the client from it.
func (g *Gateway) respond(ctx context.Context, c call, pr pairing) outcome {
	resp := c.resp
	buf := getBodyBuf()
	defer putBodyBuf(buf)
	if resp.ContentLength > 0 && resp.ContentLength <= g.cfg.MaxResponse {
		buf.Grow(int(resp.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(io.LimitReader(progressReader{resp.Body, c.wd}, g.cfg.MaxResponse+1))
	body := buf.Bytes()
	if err != nil {
		return c.outcome(result{class: classifyErr(err, ctx, c.r.Context()), err: fmt.Errorf("read the response: %w", attemptErr(err, ctx))})
	}
	if int64(len(body)) > g.cfg.MaxResponse {
		return c.outcome(result{class: ClassServer, status: resp.StatusCode, err: errTooLarge})
	}
	c.wd.stop()
	rs, err := scanResponse(body)
	if m, ok := rs.model(body); ok && m != "" {
		c.model = capModel(m)
	}
	return pr.respond(c, body, rs, err)
}

// usageIn decodes a "usage" value.
func usageIn(v []byte) (prompt, completion int) {
	if len(v) == 0 || v[0] != '{' {
		return 0, 0
	}
	var u struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		InputTokens      int `json:"input_tokens"`
		OutputTokens     int `json:"output_tokens"`
	}
	if json.Unmarshal(v, &u) != nil {
		return 0, 0
	}
	return u.PromptTokens + u.InputTokens, u.CompletionTokens + u.OutputTokens
}

// responseSpans is what one scan of a response body finds: the first
// top-level "model" and "usage" members.
type responseSpans struct {
	modelStart, modelEnd int
	usageStart, usageEnd int
	hasModel, hasUsage   bool
}

var responseKeys = []string{"model", "usage"}

// scanResponse scans a response body once (jsonscan.LocateAll). err is
// non-nil when the body is not a JSON object as far as the model: a fault
// after a well-formed model member does not stop its rewrite.
func scanResponse(doc []byte) (responseSpans, error) {
	var sp [2][2]int
	err := jsonscan.LocateAll(doc, responseKeys, sp[:])
	rs := responseSpans{modelStart: sp[0][0], modelEnd: sp[0][1], hasModel: sp[0][0] >= 0,
		usageStart: sp[1][0], usageEnd: sp[1][1], hasUsage: sp[1][0] >= 0}
	if rs.hasModel {
		err = nil
	}
	return rs, err
}

// model is the response's model string; ok is false when absent or not a
// string.
func (rs *responseSpans) model(doc []byte) (string, bool) {
	if !rs.hasModel || doc[rs.modelStart] != '"' {
		return "", false
	}
	var buf [64]byte
	return string(jsonscan.Unquoted(doc, rs.modelStart, rs.modelEnd, buf[:0])), true
}

func (rs *responseSpans) usage(doc []byte) (prompt, completion int) {
	if !rs.hasUsage {
		return 0, 0
	}
	return usageIn(doc[rs.usageStart:rs.usageEnd])
}
