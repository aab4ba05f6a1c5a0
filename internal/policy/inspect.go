package policy

import (
	"strings"

	"github.com/rolter/rolter/internal/jsonscan"
)

// Request is what admission needs to know about a client request body, read
// without decoding the whole body.
type Request struct {
	// MaxTokens is the output limit the client asked for, read the way the
	// upstream reads it: on /chat/completions max_completion_tokens when it is
	// positive, else max_tokens; max_tokens on /completions and /messages;
	// max_output_tokens on /responses. 0 when absent or null.
	MaxTokens int
	// HasTools: a "tools" or legacy "functions" member that is neither null
	// nor an empty array.
	HasTools bool
	// HasMedia: an image, audio or video content part in a message (see
	// the package documentation for the part types that count).
	HasMedia bool
	// PromptLowerBound is a number of tokens the prompt is known to have at
	// least, for every mainstream tokenizer (see the package documentation).
	// For requests that hold several prompts (/completions and /embeddings
	// with an array of inputs) it is the bound of the longest one, since each
	// is its own sequence.
	PromptLowerBound int
}

type endpointKind uint8

const (
	epOther endpointKind = iota
	epChat
	epCompletions
	epResponses
	epEmbeddings
	epMessages
)

// kindOf accepts the endpoint with or without the /v1 prefix.
func kindOf(endpoint string) endpointKind {
	switch strings.TrimPrefix(endpoint, "/v1") {
	case "/chat/completions":
		return epChat
	case "/completions":
		return epCompletions
	case "/responses":
		return epResponses
	case "/embeddings":
		return epEmbeddings
	case "/messages":
		return epMessages
	}
	return epOther
}

type inspection struct {
	mct, mt, mot     count // max_completion_tokens, max_tokens, max_output_tokens
	tools, functions bool
	media            bool
	conv             conv
	convSet          bool // messages (or Responses input) seen
	prompt           int  // /completions and /embeddings prompt bound
	promptSet        bool
	instr            seg // Responses instructions, Anthropic system
	instrSet         bool
	noBound          bool  // the prompt may be transformed unpredictably
	prev             bool  // Responses previous_response_id or conversation
	trunc            count // vLLM truncate_prompt_tokens
}

// Inspect reads body, a JSON object the gateway has already validated, for
// the fields of Request. It walks the body once, in place: top-level members
// other than the few it needs are skipped, and the text of messages and
// prompts is counted where it lies, without being copied.
//
// endpoint is the OpenAI path the request was made on: "/chat/completions",
// "/completions", "/responses" or "/embeddings" (also "/messages" for the
// Anthropic surface), with or without the "/v1" prefix. An unknown endpoint
// yields only HasTools.
//
// The error, when not nil, is a *Refusal with Status 400: Code
// "invalid_value" for a max-token member that is not null or a non-negative
// integer, "invalid_json" for a body that is not a JSON object.
func Inspect(body []byte, endpoint string) (Request, error) {
	r, err := inspect(body, endpoint)
	return r, refusal(err)
}

func inspect(body []byte, endpoint string) (Request, error) {
	var n Inspector
	n.Reset(body, endpoint)
	if err := jsonscan.Walk(body, n.Member); err != nil {
		return Request{}, err
	}
	return n.in.result(n.ep)
}

// Inspector is Inspect one top-level member at a time, for a caller that
// walks the body for members of its own (the gateway: model, stream,
// stream_options) in the same pass: it calls Member for every other
// top-level member, then Request and Limits. An Inspector must not be
// copied once Member was called.
type Inspector struct {
	p   parser
	ep  endpointKind
	in  inspection
	lim Limits
}

// Reset starts the inspection of body, a JSON object, for endpoint (as
// Inspect takes it).
func (n *Inspector) Reset(body []byte, endpoint string) {
	ep := kindOf(endpoint)
	*n = Inspector{p: parser{b: body}, ep: ep, lim: newLimits(body, ep)}
}

// Member reads the top-level member key whose value starts at body[v] and
// returns the offset just past the value, as jsonscan.Object's callback.
func (n *Inspector) Member(key []byte, v int) (int, error) {
	c, end, counted, err := n.lim.member(&n.p, key, v)
	if !counted {
		return n.p.topMember(&n.in, n.ep, key, v)
	}
	switch string(key) {
	case "max_completion_tokens":
		n.in.mct = c
	case "max_tokens":
		n.in.mt = c
	case "max_output_tokens":
		n.in.mot = c
	}
	return end, err
}

// Request is what Inspect returns, once Member saw every member.
func (n *Inspector) Request() (Request, error) {
	r, err := n.in.result(n.ep)
	return r, refusal(err)
}

// Limits is where the body sets its output limit, for Decide. It refers to
// the Inspector's storage.
func (n *Inspector) Limits() Limits { return n.lim }

func (p *parser) topMember(in *inspection, ep endpointKind, key []byte, v int) (int, error) {
	const depth = 1
	k := string(key) // no allocation: only compared
	switch k {
	case "tools", "functions":
		has, end, err := p.nonEmpty(v, depth)
		if k == "tools" {
			in.tools = has
		} else {
			in.functions = has
		}
		return end, err
	}
	switch ep {
	case epChat, epCompletions, epEmbeddings:
		// vLLM's extensions to the OpenAI endpoints, and the members
		// chat and embeddings share.
		switch {
		case k == "truncate_prompt_tokens":
			return p.countInto(&in.trunc, v)
		case k == "max_tokens" && ep != epEmbeddings:
			return p.countInto(&in.mt, v)
		case k == "messages" && ep != epCompletions:
			return p.conversation(in, v, dChat)
		case k == "chat_template" && ep != epCompletions:
			// A template sent with the request may render anything.
			in.noBound = in.noBound || !p.isNull(v)
		case k == "max_completion_tokens" && ep == epChat:
			return p.countInto(&in.mct, v)
		case k == "prompt" && ep == epCompletions, k == "input" && ep == epEmbeddings:
			return p.prompts(in, v)
		}
	case epResponses:
		switch k {
		case "max_output_tokens":
			return p.countInto(&in.mot, v)
		case "input":
			return p.conversation(in, v, dResponses)
		case "instructions":
			return p.instructions(in, v, dResponses)
		case "truncation":
			// "auto" drops items from the start of a conversation that
			// does not fit: such a request is never too long.
			end, err := p.skip(v, depth)
			if err == nil && !p.isNull(v) && !(p.b[v] == '"' && p.strIs(v, end, "disabled")) {
				in.noBound = true
			}
			return end, err
		case "previous_response_id", "conversation":
			// Earlier turns are added upstream: the instructions may then
			// not be the first message, so they are not counted.
			in.prev = in.prev || !p.isNull(v)
		}
	case epMessages:
		switch k {
		case "max_tokens":
			return p.countInto(&in.mt, v)
		case "messages":
			return p.conversation(in, v, dAnthropic)
		case "system":
			return p.instructions(in, v, dAnthropic)
		}
	}
	return p.skip(v, depth)
}

func (p *parser) countInto(c *count, v int) (int, error) {
	var end int
	var err error
	*c, end, err = p.count(v, 1)
	return end, err
}

func (in *inspection) result(ep endpointKind) (Request, error) {
	r := Request{HasTools: in.tools || in.functions, HasMedia: in.media || in.conv.media}
	check := func(c count, name string) error {
		if c.bad {
			return &Refusal{Status: 400, Code: "invalid_value",
				Message: name + " must be null or a non-negative integer"}
		}
		return nil
	}
	switch ep {
	case epChat:
		if err := check(in.mct, "max_completion_tokens"); err != nil {
			return Request{}, err
		}
		if err := check(in.mt, "max_tokens"); err != nil {
			return Request{}, err
		}
		// vLLM: max_completion_tokens or max_tokens (a 0 falls through).
		r.MaxTokens = in.mct.n
		if r.MaxTokens == 0 {
			r.MaxTokens = in.mt.n
		}
	case epCompletions, epMessages:
		if err := check(in.mt, "max_tokens"); err != nil {
			return Request{}, err
		}
		r.MaxTokens = in.mt.n
	case epResponses:
		if err := check(in.mot, "max_output_tokens"); err != nil {
			return Request{}, err
		}
		r.MaxTokens = in.mot.n
	}

	switch ep {
	case epChat:
		r.PromptLowerBound = in.conv.bound()
	case epCompletions:
		r.PromptLowerBound = in.prompt
	case epEmbeddings:
		switch {
		case in.promptSet && in.convSet:
			// Ambiguous: which one the upstream embeds is its business.
		case in.promptSet:
			r.PromptLowerBound = in.prompt
		case in.convSet:
			r.PromptLowerBound = in.conv.bound()
		}
	case epResponses, epMessages:
		c := in.conv
		if in.instrSet {
			c.sys, c.hasSys = in.instr, true
		}
		if in.prev {
			c.hasSys = false
		}
		r.PromptLowerBound = c.bound()
	}
	if t := in.trunc; t.present && !t.null {
		// vLLM keeps only the last k prompt tokens (-1: the context).
		if t.bad || t.n <= 0 {
			in.noBound = true
		} else {
			r.PromptLowerBound = min(r.PromptLowerBound, t.n)
		}
	}
	if in.noBound {
		r.PromptLowerBound = 0
	}
	return r, nil
}
