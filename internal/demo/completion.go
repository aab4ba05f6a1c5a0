package demo

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// completionRequest holds the only request fields the simulator acts on;
// everything else (messages, prompt, sampling) is accepted and ignored.
type completionRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           *int `json:"max_tokens"`
	MaxCompletionTokens *int `json:"max_completion_tokens"`
}

func (r *completionRequest) model() string { return r.Model }

// kind distinguishes the two completion endpoints, which differ only in
// object names and where the text goes.
type kind struct {
	idPrefix    string
	object      string // non-streamed object
	chunkObject string // streamed object
	chat        bool
}

var (
	chatKind = kind{idPrefix: "chatcmpl-demo-", object: "chat.completion", chunkObject: "chat.completion.chunk", chat: true}
	textKind = kind{idPrefix: "cmpl-demo-", object: "text_completion", chunkObject: "text_completion"}
)

func (h *handler) serveChat(w http.ResponseWriter, r *http.Request, cfg reqConfig) {
	h.serveCompletion(w, r, cfg, chatKind)
}

func (h *handler) serveCompletions(w http.ResponseWriter, r *http.Request, cfg reqConfig) {
	h.serveCompletion(w, r, cfg, textKind)
}

func (h *handler) serveCompletion(w http.ResponseWriter, r *http.Request, cfg reqConfig, k kind) {
	var req completionRequest
	body, ok := readRequest(w, r, &req)
	if !ok {
		return
	}
	limit := req.MaxTokens
	if req.MaxCompletionTokens != nil {
		limit = req.MaxCompletionTokens
	}
	if limit != nil && *limit < 1 {
		writeInvalid(w, "max_tokens must be at least 1")
		return
	}

	sc := h.script(cfg.chunks)
	n, finish := len(sc.raw), "stop"
	if limit != nil && *limit < n {
		// Cut the text short like a real length stop, rather than re-split
		// it, so the reply reads as truncated.
		n, finish = *limit, "length"
	}
	u := usage{PromptTokens: max(len(body)/4, 1), CompletionTokens: n}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	id := k.idPrefix + strconv.FormatUint(h.seq.Add(1), 10)
	created := time.Now().Unix()

	if req.Stream {
		includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		h.stream(w, r, cfg, k, streamPlan{
			id: id, created: created, model: req.Model,
			pieces: sc.encoded[:n], finish: finish, usage: u, includeUsage: includeUsage,
		})
		return
	}

	// A non-streamed reply arrives only when generation is done, so it
	// waits for the whole simulated generation, not just the first byte.
	cfg.firstByteDelay += time.Duration(n) * cfg.chunkDelay
	if !begin(r, cfg) {
		return
	}
	text := sc.joined
	if n < len(sc.raw) {
		text = strings.Join(sc.raw[:n], "")
	}
	resp := completionResponse{
		ID: id, Object: k.object, Created: created, Model: req.Model, Usage: u,
		Choices: []completionChoice{{FinishReason: finish}},
	}
	if k.chat {
		resp.Choices[0].Message = &chatMessage{Role: "assistant", Content: text}
	} else {
		resp.Choices[0].Text = &text
	}
	writeBody(w, http.StatusOK, mustJSON(resp))
}

type streamPlan struct {
	id           string
	created      int64
	model        string
	pieces       [][]byte
	finish       string
	usage        usage
	includeUsage bool
}

// stream writes the SSE events by appending pre-encoded fragments into one
// reused buffer, because this loop is what load tests hammer.
func (h *handler) stream(w http.ResponseWriter, r *http.Request, cfg reqConfig, k kind, p streamPlan) {
	ctx := r.Context()
	if !begin(r, cfg) {
		return
	}

	// Every event starts `data: {"id":...,"model":...,`; build it once.
	model, err := json.Marshal(p.model)
	if err != nil {
		// Unreachable for a string, but never emit malformed JSON.
		writeInvalid(w, "model is not encodable")
		return
	}
	head := make([]byte, 0, 128+len(model))
	head = append(head, `data: {"id":"`...)
	head = append(head, p.id...)
	head = append(head, `","object":"`...)
	head = append(head, k.chunkObject...)
	head = append(head, `","created":`...)
	head = strconv.AppendInt(head, p.created, 10)
	head = append(head, `,"model":`...)
	head = append(head, model...)
	head = append(head, ',')

	var open, tail string
	if k.chat {
		open, tail = `"choices":[{"index":0,"delta":{"content":`, `},"logprobs":null,"finish_reason":null}]}`+"\n\n"
	} else {
		open, tail = `"choices":[{"index":0,"text":`, `,"logprobs":null,"finish_reason":null}]}`+"\n\n"
	}

	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// /v1/completions has no role chunk, so flush the headers alone to make
	// the response visibly start when the first-byte delay ends.
	if !k.chat {
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return
		}
	}
	buf := make([]byte, 0, 512)
	send := func() bool {
		if _, err := w.Write(buf); err != nil {
			return false
		}
		// A writer that cannot flush still gets the whole stream, just
		// late; that is not a reason to abort.
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		return true
	}

	if k.chat {
		buf = append(append(buf, head...), `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		if !send() {
			return
		}
	}
	var timer pacer
	defer timer.stop()
	for _, piece := range p.pieces {
		// Each chunk is one simulated token, so each costs one delay; this
		// keeps a streamed reply as long as a non-streamed one.
		if !timer.sleep(ctx, cfg.chunkDelay) {
			return
		}
		buf = append(append(append(append(buf[:0], head...), open...), piece...), tail...)
		if !send() {
			return
		}
	}

	buf = append(buf[:0], head...)
	if k.chat {
		buf = append(buf, `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
	} else {
		buf = append(buf, `"choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"`...)
	}
	buf = append(append(buf, p.finish...), `"}]}`+"\n\n"...)
	if !send() {
		return
	}

	if p.includeUsage {
		buf = append(append(buf[:0], head...), `"choices":[],"usage":{"prompt_tokens":`...)
		buf = strconv.AppendInt(buf, int64(p.usage.PromptTokens), 10)
		buf = append(buf, `,"completion_tokens":`...)
		buf = strconv.AppendInt(buf, int64(p.usage.CompletionTokens), 10)
		buf = append(buf, `,"total_tokens":`...)
		buf = strconv.AppendInt(buf, int64(p.usage.TotalTokens), 10)
		buf = append(buf, "}}\n\n"...)
		if !send() {
			return
		}
	}
	buf = append(buf[:0], "data: [DONE]\n\n"...)
	send()
}
