package policy

// The conversations a request holds: chat messages, Responses input
// items, Anthropic messages, and the prompts of /completions and
// /embeddings, read for the prompt lower bound.

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
