package policy

import (
	"bytes"
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

type role uint8

const (
	roleOther role = iota
	roleUser
	roleAssistant
	roleSystem
)

// dialect is the message format being walked.
type dialect uint8

const (
	dChat      dialect = iota // OpenAI chat messages (also vLLM chat embeddings)
	dResponses                // OpenAI Responses input items
	dAnthropic                // Anthropic messages
)

// conv accumulates what a conversation contributes to the bound. Only text
// that every mainstream chat template renders is kept (package
// documentation): user turns; assistant turns without tool calls; the first
// message if it is a system message and the last message is a user turn.
type conv struct {
	user     seg
	asst     seg
	sys      seg
	hasSys   bool
	last     role
	funcCall bool // a Responses function_call item: assistant turns are dropped
	media    bool // kept across a reset: a repeated key does not hide media
}

func (c *conv) reset() { *c = conv{media: c.media} }

func (c *conv) bound() int {
	s := c.user
	if !c.funcCall {
		s.add(c.asst)
	}
	if c.hasSys && c.last == roleUser {
		s.add(c.sys)
	}
	return s.bound()
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
	case epChat:
		switch k {
		case "max_completion_tokens":
			return p.countInto(&in.mct, v)
		case "max_tokens":
			return p.countInto(&in.mt, v)
		case "messages":
			return p.conversation(in, v, dChat)
		case "chat_template":
			// A template sent with the request may render anything.
			in.noBound = in.noBound || !p.isNull(v)
		case "truncate_prompt_tokens":
			return p.countInto(&in.trunc, v)
		}
	case epCompletions:
		switch k {
		case "max_tokens":
			return p.countInto(&in.mt, v)
		case "prompt":
			return p.prompts(in, v)
		case "truncate_prompt_tokens":
			return p.countInto(&in.trunc, v)
		}
	case epEmbeddings:
		switch k {
		case "input":
			return p.prompts(in, v)
		case "messages":
			return p.conversation(in, v, dChat)
		case "chat_template":
			in.noBound = in.noBound || !p.isNull(v)
		case "truncate_prompt_tokens":
			return p.countInto(&in.trunc, v)
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

// prompts reads a /completions prompt or an /embeddings input: a string, an
// array of strings, an array of token ids (one prompt) or an array of arrays
// of token ids. Each prompt is its own sequence, so the bound is the largest.
func (p *parser) prompts(in *inspection, v int) (int, error) {
	const depth = 1
	in.prompt, in.promptSet = 0, !p.isNull(v)
	switch p.b[v] {
	case '"':
		var s seg
		end, err := p.text(v, &s, false)
		in.prompt = s.bound()
		return end, err
	case '[':
		best, ids := 0, 0
		end, err := p.array(v, depth, func(e int) (int, error) {
			switch c := p.b[e]; {
			case c == '"':
				var s seg
				end, err := p.text(e, &s, false)
				best = max(best, s.bound())
				return end, err
			case c == '[':
				n := 0
				end, err := p.array(e, depth+1, func(x int) (int, error) {
					if c := p.b[x]; c == '-' || isDigit(c) {
						n++
					}
					return p.skip(x, depth+2)
				})
				best = max(best, n)
				return end, err
			case c == '-' || isDigit(c):
				ids++
			}
			return p.skip(e, depth+1)
		})
		in.prompt = max(best, ids)
		return end, err
	}
	return p.skip(v, depth)
}

// conversation reads chat messages, Responses input or Anthropic messages.
// A repeated key replaces the earlier value, as Python's json module does.
func (p *parser) conversation(in *inspection, v int, d dialect) (int, error) {
	const depth = 1
	c := &in.conv
	c.reset()
	in.convSet = !p.isNull(v)
	switch p.b[v] {
	case '[':
		idx := 0
		return p.array(v, depth, func(e int) (int, error) {
			end, err := p.message(e, depth+1, c, d, idx)
			idx++
			return end, err
		})
	case '"':
		if d == dResponses {
			// A string input is one user message.
			end, err := p.text(v, &c.user, true)
			c.last = roleUser
			return end, err
		}
	}
	return p.skip(v, depth)
}

// instructions reads the Responses "instructions" string or the Anthropic
// "system" string or text blocks: a system message placed first.
func (p *parser) instructions(in *inspection, v int, d dialect) (int, error) {
	const depth = 1
	in.instr, in.instrSet = seg{}, false
	switch p.b[v] {
	case '"':
		in.instrSet = true
		return p.text(v, &in.instr, true)
	case '[':
		if d == dAnthropic {
			in.instrSet = true
			var calls bool
			return p.content(v, depth, &in.instr, &in.media, &calls)
		}
	}
	return p.skip(v, depth)
}

type itemKind uint8

const (
	itemMessage itemKind = iota
	itemFuncCall
	itemOther
)

// message reads one chat message, Responses input item or Anthropic message.
func (p *parser) message(i, depth int, c *conv, d dialect, idx int) (int, error) {
	if p.b[i] != '{' {
		c.last = roleOther
		return p.skip(i, depth)
	}
	var (
		r                   role
		msg                 seg
		toolCalls, funcCall bool // chat tool_calls / function_call not null
		blockCalls          bool // Anthropic tool_use content blocks
		item                = itemMessage
		buf                 [16]byte
	)
	end, err := p.object(i, depth, func(key []byte, v int) (int, error) {
		switch string(key) {
		case "role":
			end, err := p.skip(v, depth+1)
			r = roleOther
			if err == nil && p.b[v] == '"' {
				switch string(p.strVal(v, end, buf[:0])) {
				case "user":
					r = roleUser
				case "assistant":
					r = roleAssistant
				case "system":
					r = roleSystem
				}
			}
			return end, err
		case "content":
			msg = seg{}
			blockCalls = false
			return p.content(v, depth+1, &msg, &c.media, &blockCalls)
		case "tool_calls":
			// Llama 3.1 and Mistral templates render the calls instead
			// of the content when the key is there, even as [].
			toolCalls = !p.isNull(v)
		case "function_call":
			funcCall = !p.isNull(v)
		case "type":
			if d == dResponses {
				end, err := p.skip(v, depth+1)
				item = itemOther
				if err == nil && p.b[v] == '"' {
					switch string(p.strVal(v, end, buf[:0])) {
					case "message":
						item = itemMessage
					case "function_call":
						item = itemFuncCall
					}
				}
				return end, err
			}
		case "output":
			// A Responses function_call_output (or computer call output)
			// may carry images.
			end, _, err := p.walk(v, depth+1, key, &c.media)
			return end, err
		}
		return p.skip(v, depth+1)
	})
	if err != nil {
		return 0, err
	}
	if d == dResponses && item != itemMessage {
		if item == itemFuncCall {
			c.funcCall = true
		}
		c.last = roleOther
		return end, nil
	}
	c.last = r
	switch r {
	case roleUser:
		c.user.add(msg)
	case roleAssistant:
		if !toolCalls && !funcCall && !blockCalls {
			c.asst.add(msg)
		}
	case roleSystem:
		if idx == 0 {
			c.sys, c.hasSys = msg, true
		}
	}
	return end, nil
}

// content reads a message's content: a string, or an array of parts whose
// text parts are counted into msg (nil: count nothing) and whose media parts
// set *media.
func (p *parser) content(v, depth int, msg *seg, media *bool, calls *bool) (int, error) {
	switch p.b[v] {
	case '"':
		if msg == nil {
			return p.skip(v, depth)
		}
		return p.text(v, msg, true)
	case '[':
		return p.array(v, depth, func(e int) (int, error) {
			if p.b[e] == '{' {
				return p.part(e, depth+1, msg, media, calls)
			}
			return p.skip(e, depth+1)
		})
	case '{':
		return p.part(v, depth, nil, media, nil)
	}
	return p.skip(v, depth)
}

type partKind uint8

const (
	partOther partKind = iota
	partText
	partMedia
	partFile
	partToolUse
)

// partKindOf classifies a content part "type".
func partKindOf(t []byte) partKind {
	switch string(t) {
	case "text", "input_text", "output_text":
		return partText
	case "image_url", "input_image", "image", "image_file", "image_embeds", "image_pil",
		"input_audio", "audio", "audio_url",
		"video_url", "video", "input_video",
		"computer_screenshot":
		return partMedia
	case "file", "input_file", "document":
		return partFile
	case "tool_use", "server_tool_use":
		return partToolUse
	}
	return partOther
}

// isMediaKey: the members by which vLLM recognises a part without "type".
func isMediaKey(k []byte) bool {
	switch string(k) {
	case "image_url", "input_image", "image_embeds", "image_pil",
		"input_audio", "audio_url", "video_url":
		return true
	}
	return false
}

// part reads one content part. Its text counts only when its type is a text
// type; a repeated "text" replaces the earlier one.
func (p *parser) part(i, depth int, msg *seg, media *bool, calls *bool) (int, error) {
	var (
		base, tmp                           seg
		kind                                partKind
		typed, textSeen, mediaKey, evidence bool
		buf                                 [24]byte
	)
	if msg != nil {
		base = *msg
	}
	end, err := p.object(i, depth, func(key []byte, v int) (int, error) {
		switch string(key) {
		case "type":
			typed = true
			end, err := p.skip(v, depth+1)
			kind = partOther
			if err == nil && p.b[v] == '"' {
				kind = partKindOf(p.strVal(v, end, buf[:0]))
			}
			return end, err
		case "text":
			textSeen = false
			if msg != nil && p.b[v] == '"' {
				tmp, textSeen = base, true
				return p.text(v, &tmp, true)
			}
		}
		if isMediaKey(key) {
			mediaKey = true
		}
		end, ev, err := p.walk(v, depth+1, key, media)
		evidence = evidence || ev
		return end, err
	})
	if err != nil {
		return 0, err
	}
	if msg != nil && textSeen && kind == partText {
		*msg = tmp
	}
	if kind == partMedia || kind == partFile && evidence || !typed && mediaKey {
		*media = true
	}
	if kind == partToolUse && calls != nil {
		*calls = true
	}
	return end, nil
}

// walk passes over the value of member key inside a content part, looking
// for evidence that a file part holds an image, audio or video (a data: URL
// or MIME type of that kind, or a file name with such an extension), and
// reading nested "content"/"output" parts (Anthropic tool results, Responses
// tool outputs) for media.
func (p *parser) walk(i, depth int, key []byte, media *bool) (end int, ev bool, err error) {
	switch p.b[i] {
	case '"':
		end, _, err := p.str(i)
		if err != nil {
			return 0, false, err
		}
		switch string(key) {
		case "file_data", "file_url", "url", "data", "image_url", "audio_url", "video_url":
			ev = p.strHasPrefixFold(i, end, "data:image/") || p.strHasPrefixFold(i, end, "data:audio/") ||
				p.strHasPrefixFold(i, end, "data:video/")
		case "media_type", "mime_type", "mimeType", "content_type":
			ev = p.strHasPrefixFold(i, end, "image/") || p.strHasPrefixFold(i, end, "audio/") ||
				p.strHasPrefixFold(i, end, "video/")
		case "filename", "file_name", "name":
			ev = p.mediaExt(i, end)
		}
		return end, ev, nil
	case '{':
		if nested(key) {
			end, err := p.part(i, depth, nil, media, nil)
			return end, false, err
		}
		end, err := p.object(i, depth, func(k []byte, v int) (int, error) {
			end, e, err := p.walk(v, depth+1, k, media)
			ev = ev || e
			return end, err
		})
		return end, ev, err
	case '[':
		isParts := nested(key)
		end, err := p.array(i, depth, func(v int) (int, error) {
			if isParts && p.b[v] == '{' {
				return p.part(v, depth+1, nil, media, nil)
			}
			end, e, err := p.walk(v, depth+1, key, media)
			ev = ev || e
			return end, err
		})
		return end, ev, err
	}
	end, err = p.skip(i, depth)
	return end, false, err
}

func nested(key []byte) bool {
	k := string(key)
	return k == "content" || k == "output"
}

// mediaExt reports whether the file name at b[i:end] ends in an image, audio
// or video extension.
func (p *parser) mediaExt(i, end int) bool {
	var buf [64]byte
	name := p.strVal(i, end, buf[:0])
	dot := bytes.LastIndexByte(name, '.')
	if dot < 0 || len(name)-dot > 6 {
		return false
	}
	var ext [6]byte
	n := copy(ext[:], name[dot+1:])
	for k := range n {
		if 'A' <= ext[k] && ext[k] <= 'Z' {
			ext[k] += 'a' - 'A'
		}
	}
	switch string(ext[:n]) {
	case "png", "jpg", "jpeg", "gif", "webp", "bmp", "tif", "tiff", "heic", "heif", "avif", "svg", "ico",
		"mp3", "wav", "m4a", "ogg", "oga", "flac", "aac", "opus", "weba", "mpga", "aiff", "amr",
		"mp4", "mov", "webm", "mkv", "avi", "mpeg", "mpg", "m4v", "3gp", "wmv":
		return true
	}
	return false
}

// strVal returns the decoded contents of the string value at b[i:end]: the
// raw bytes when there is no escape, else decoded into dst.
func (p *parser) strVal(i, end int, dst []byte) []byte { return jsonscan.Unquoted(p.b, i, end, dst) }
