package policy

import (
	"slices"
	"strconv"

	"github.com/rolter/rolter/internal/jsonscan"
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
// no ceiling. A caller that has walked the body with an Inspector already
// uses Decide, which does not walk it again.
func Admit(body []byte, endpoint string, req Request, p store.Policy, context int) ([]byte, *Refusal) {
	var lim Limits
	if p.MaxOutputTokens > 0 {
		var err error
		if lim, err = limitsOf(body, kindOf(endpoint)); err != nil {
			r, ok := refusal(err).(*Refusal)
			if !ok {
				r = &Refusal{Status: 400, Code: "invalid_json", Message: err.Error()}
			}
			return nil, r
		}
	}
	c, r := Decide(req, lim, p, context)
	if r != nil {
		return nil, r
	}
	if !c.Changes() {
		return body, nil
	}
	return jsonscan.Splice(make([]byte, 0, len(body)+c.Grow()), body, c.Edits(nil)), nil
}

// Decide is Admit without the body: lim is where the body sets its output
// limit (Inspector.Limits; read only when p has a ceiling), and the Clamp
// returned holds the edits that apply the ceiling.
func Decide(req Request, lim Limits, p store.Policy, context int) (Clamp, *Refusal) {
	if p.Tools == "deny" && req.HasTools {
		return Clamp{}, &Refusal{Status: 400, Code: CodeToolsDenied,
			Message: "tools are not allowed on this model: remove \"tools\" and \"functions\" from the request"}
	}
	if p.Media == "deny" && req.HasMedia {
		return Clamp{}, &Refusal{Status: 400, Code: CodeMediaDenied,
			Message: "image, audio and video input is not allowed on this model: send text only"}
	}
	c := Clamp{Limit: max(req.MaxTokens, 0)}
	if p.MaxOutputTokens > 0 {
		c = lim.clamp(p.MaxOutputTokens, c.Limit)
	}
	if context > 0 {
		output := c.Limit
		prompt := max(req.PromptLowerBound, 0)
		if output > context || prompt > context-output {
			msg := "at least " + strconv.Itoa(prompt) + " prompt tokens exceeds the context of " +
				strconv.Itoa(context) + " tokens"
			if output > 0 {
				msg = "max output " + strconv.Itoa(output) + " + " + msg
			}
			return Clamp{}, &Refusal{Status: 400, Code: CodeContextLengthExceeded, Message: msg}
		}
	}
	return c, nil
}

// occurrence is one top-level output-limit member of a body.
type occurrence struct {
	key        int // index into the endpoint's keys; -1 for n_predict
	start, end int // the value's span
	c          count
}

// Limits is where a body sets its output limit: its top-level output-limit
// members (and llama.cpp's n_predict) with their values, found by
// Inspector.Member as it walks the body.
type Limits struct {
	ep    endpointKind
	open  int  // the offset of the object's '{'
	empty bool // the object has no members
	occs  []occurrence
	buf   [4]occurrence
}

// member records an output-limit member, when key is one for the
// endpoint; counted is false for any other key.
func (l *Limits) member(p *parser, key []byte, v int) (c count, end int, counted bool, err error) {
	keys, _ := outputKeys(l.ep)
	if keys == nil {
		return count{}, 0, false, nil
	}
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
		return count{}, 0, false, nil
	}
	c, end, err = p.count(v, 1)
	if err == nil {
		if l.occs == nil {
			l.occs = l.buf[:0]
		}
		l.occs = append(l.occs, occurrence{key: k, start: v, end: end, c: c})
	}
	return c, end, true, err
}

// newLimits is the Limits of body before its members are read: where its
// object opens, and whether it has members at all (an inserted member then
// needs a comma).
func newLimits(body []byte, ep endpointKind) Limits {
	open := jsonscan.SkipWS(body, 0)
	j := jsonscan.SkipWS(body, open+1)
	return Limits{ep: ep, open: open, empty: j < len(body) && body[j] == '}'}
}

// limitsOf walks body for its output-limit members only.
func limitsOf(body []byte, ep endpointKind) (Limits, error) {
	l := newLimits(body, ep)
	if keys, _ := outputKeys(ep); keys == nil {
		return l, nil
	}
	p := parser{b: body}
	err := jsonscan.Walk(body, func(key []byte, v int) (int, error) {
		_, end, counted, err := l.member(&p, key, v)
		if !counted {
			return p.skip(v, 1)
		}
		return end, err
	})
	if err != nil {
		return Limits{}, err
	}
	l.occs = slices.Clone(l.occs) // not into l.buf: l is returned by value
	return l, nil
}

// Clamp is what an output ceiling makes of a body: the ceiling written over
// the value of each limit member it rewrites, and, when the body sets none,
// a member inserted first in the object. The zero Clamp changes nothing.
type Clamp struct {
	// Limit is the output limit the upstream applies once the edits are
	// made: the client's, or the ceiling (0 when neither is known).
	Limit int
	spans []span
	// insert is the member inserted after the object's '{' (with its
	// comma when the object has other members); at is that offset.
	insert []byte
	at     int
	num    []byte // the ceiling's digits
}

type span struct{ start, end int }

// Changes reports whether the clamp edits the body at all.
func (c *Clamp) Changes() bool { return len(c.spans) > 0 || c.insert != nil }

// Grow is how many bytes the edits add to the body, at most.
func (c *Clamp) Grow() int {
	n := len(c.insert)
	for _, s := range c.spans {
		n += max(len(c.num)-(s.end-s.start), 0)
	}
	return n
}

// Edits appends the clamp's edits, in body order, to dst.
func (c *Clamp) Edits(dst []jsonscan.Edit) []jsonscan.Edit {
	if c.insert != nil {
		dst = append(dst, jsonscan.Edit{Start: c.at, End: c.at, Value: c.insert})
	}
	for _, s := range c.spans {
		dst = append(dst, jsonscan.Edit{Start: s.start, End: s.end, Value: c.num})
	}
	return dst
}

// clamp applies the ceiling to the limits. output is the client's limit as
// Inspect read it, returned unchanged for an endpoint without one.
func (l *Limits) clamp(ceiling, output int) Clamp {
	ep := l.ep
	keys, insert := outputKeys(ep)
	if keys == nil {
		return Clamp{Limit: output}
	}
	occs := l.occs

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
		return Clamp{Limit: limit}
	}
	c := Clamp{Limit: limit, num: strconv.AppendInt(nil, int64(ceiling), 10)}
	if !present {
		// No limit member at all: insert one first in the object.
		c.at = l.open + 1
		c.insert = make([]byte, 0, len(insert)+len(c.num)+4)
		c.insert = append(c.insert, '"')
		c.insert = append(c.insert, insert...)
		c.insert = append(c.insert, '"', ':')
		c.insert = append(c.insert, c.num...)
		if !l.empty {
			c.insert = append(c.insert, ',')
		}
	}
	for k, o := range occs {
		if rw[k] {
			c.spans = append(c.spans, span{o.start, o.end})
		}
	}
	return c
}
