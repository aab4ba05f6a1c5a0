package policy

import (
	"strconv"

	"github.com/rolter/rolter/internal/store"
)

// Refusal is a request the route's policy turns away. Status is the HTTP
// status and Code the stable error code; Message says why, for the client.
type Refusal struct {
	Status  int
	Code    string
	Message string
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

// Refusal codes.
const (
	CodeToolsDenied           = "tools_denied"
	CodeMediaDenied           = "media_denied"
	CodeContextLengthExceeded = "context_length_exceeded"
)

// outputKeys are the members through which a client sets the output limit
// on an endpoint, in the order of the upstream's precedence, and insert is
// the one written when the client sent none.
func outputKeys(ep endpointKind) (keys []string, insert string) {
	switch ep {
	case epChat:
		return chatKeys, "max_tokens"
	case epCompletions, epMessages:
		return maxTokensKey, "max_tokens"
	case epResponses:
		return responsesKeys, "max_output_tokens"
	}
	return nil, ""
}

var (
	chatKeys      = []string{"max_completion_tokens", "max_tokens"}
	maxTokensKey  = []string{"max_tokens"}
	responsesKeys = []string{"max_output_tokens"}
)

// nPredict is llama.cpp's own output limit. llama.cpp reads it before
// max_tokens and takes -1 as "unlimited", so with a ceiling it is clamped
// too.
const nPredict = "n_predict"

// Admit applies the route policy p and the pool's context length (0:
// unknown) to a request that Inspect read as req. It returns the body to
// forward or a Refusal:
//
//   - tools "deny" and req.HasTools: 400 tools_denied;
//   - media "deny" and req.HasMedia: 400 media_denied;
//   - with a max_output_tokens ceiling, every output-limit member above it
//     is rewritten to it, and a request that sets no limit gets the ceiling
//     as its limit (the value of a present null, or a member inserted first
//     in the object); only those value bytes change, every other byte of
//     body stays as it was. body itself is never modified: a changed body
//     is a new slice;
//   - when context > 0 and the output limit (the client's, or the ceiling;
//     0 when neither is known) plus req.PromptLowerBound exceeds it: 400
//     context_length_exceeded. A request that fits exactly is admitted.
//
// Admit reads the output-limit members from body itself, since it must know
// where they are to rewrite them; req.MaxTokens is used only when there is
// no ceiling.
func Admit(body []byte, endpoint string, req Request, p store.Policy, context int) ([]byte, *Refusal) {
	if p.Tools == "deny" && req.HasTools {
		return nil, &Refusal{Status: 400, Code: CodeToolsDenied,
			Message: "tools are not allowed on this model: remove \"tools\" and \"functions\" from the request"}
	}
	if p.Media == "deny" && req.HasMedia {
		return nil, &Refusal{Status: 400, Code: CodeMediaDenied,
			Message: "image, audio and video input is not allowed on this model: send text only"}
	}
	out, output := body, max(req.MaxTokens, 0)
	if p.MaxOutputTokens > 0 {
		var err error
		out, output, err = clamp(body, kindOf(endpoint), p.MaxOutputTokens, output)
		if err != nil {
			r, ok := err.(*Refusal)
			if !ok {
				r = &Refusal{Status: 400, Code: "invalid_json", Message: err.Error()}
			}
			return nil, r
		}
	}
	if context > 0 {
		prompt := max(req.PromptLowerBound, 0)
		if output > context || prompt > context-output {
			msg := "at least " + strconv.Itoa(prompt) + " prompt tokens exceeds the context of " +
				strconv.Itoa(context) + " tokens"
			if output > 0 {
				msg = "max output " + strconv.Itoa(output) + " + " + msg
			}
			return nil, &Refusal{Status: 400, Code: CodeContextLengthExceeded, Message: msg}
		}
	}
	return out, nil
}

// occurrence is one top-level output-limit member of a body.
type occurrence struct {
	key        int // index into the endpoint's keys; -1 for n_predict
	start, end int // the value's span
	c          count
}

// clamp applies the ceiling to body. output is the client's limit as
// Inspect read it, returned unchanged for an endpoint without one.
func clamp(body []byte, ep endpointKind, ceiling, output int) ([]byte, int, error) {
	keys, insert := outputKeys(ep)
	if keys == nil {
		return body, output, nil
	}
	p := parser{b: body}
	var occBuf [4]occurrence
	occs := occBuf[:0]
	i := p.ws(0)
	if i >= len(body) {
		return nil, 0, p.eof()
	}
	if body[i] != '{' {
		return nil, 0, p.errAt(i, "not a JSON object")
	}
	open := i
	end, err := p.object(i, 0, func(key []byte, v int) (int, error) {
		k := -2
		if string(key) == nPredict {
			k = -1
		}
		for j, name := range keys {
			if string(key) == name {
				k = j
			}
		}
		if k == -2 {
			return p.skip(v, 1)
		}
		c, end, err := p.count(v, 1)
		if err == nil {
			occs = append(occs, occurrence{key: k, start: v, end: end, c: c})
		}
		return end, err
	})
	if err != nil {
		return nil, 0, err
	}
	if j := p.ws(end); j < len(body) {
		return nil, 0, p.errAt(j, "data after the JSON object")
	}

	// What the upstream reads (the last of repeated keys, as Python does):
	// the first key in precedence order that sets a limit. A 0 sets one
	// only on /completions (where it means "echo the prompt, generate
	// nothing"); elsewhere vLLM's "max_completion_tokens or max_tokens"
	// passes over it to the default, which is no limit at all.
	var last [2]count
	for _, o := range occs {
		if o.key >= 0 {
			last[o.key] = o.c
		}
	}
	zeroSets := ep == epCompletions
	sets := func(c count) bool { return c.present && !c.null && !c.bad && (c.n > 0 || zeroSets) }
	limited := false
	for j := range keys {
		limited = limited || sets(last[j])
	}

	var rewrite [4]bool
	rw := rewrite[:0]
	changed := false
	for _, o := range occs {
		c := o.c
		var r bool
		if o.key < 0 {
			r = c.null || c.bad || c.n > ceiling
		} else {
			r = c.bad || !c.null && c.n > ceiling || !limited && (c.null || c.n == 0)
		}
		rw = append(rw, r)
		changed = changed || r
	}
	// The limit the upstream will apply once the rewrites are made; with
	// none left, the inserted ceiling.
	for k, o := range occs {
		if o.key >= 0 && rw[k] {
			last[o.key] = count{present: true, n: ceiling}
		} else if o.key >= 0 {
			last[o.key] = o.c
		}
	}
	limit := ceiling
	for j := range keys {
		if sets(last[j]) {
			limit = last[j].n
			break
		}
	}

	present := false
	for _, o := range occs {
		present = present || o.key >= 0
	}
	if !changed && present {
		return body, limit, nil
	}
	num := strconv.AppendInt(make([]byte, 0, 20), int64(ceiling), 10)
	grow := 0
	for k, o := range occs {
		if rw[k] {
			grow += len(num) - (o.end - o.start)
		}
	}
	if !present {
		grow += len(insert) + len(num) + 4
	}
	out := make([]byte, 0, len(body)+max(grow, 0))
	prev := 0
	if !present {
		// No limit member at all: insert one first in the object.
		out = append(out, body[:open+1]...)
		out = append(out, '"')
		out = append(out, insert...)
		out = append(out, '"', ':')
		out = append(out, num...)
		if j := p.ws(open + 1); body[j] != '}' {
			out = append(out, ',')
		}
		prev = open + 1
	}
	for k, o := range occs {
		if rw[k] {
			out = append(out, body[prev:o.start]...)
			out = append(out, num...)
			prev = o.end
		}
	}
	out = append(out, body[prev:]...)
	return out, limit, nil
}
