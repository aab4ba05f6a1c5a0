// Package anthropic translates between the Anthropic Messages API and the
// OpenAI chat completions API, in both directions, streaming included.
//
// Two directions are supported:
//
//   - an Anthropic client in front of an OpenAI-compatible upstream (vLLM and
//     the like): ToOpenAI for the request, FromOpenAIResponse and
//     StreamToAnthropic for the answer;
//   - an OpenAI client in front of an Anthropic upstream: ToAnthropic for the
//     request, FromAnthropicResponse and StreamToOpenAI for the answer.
//
// A request feature that the other side cannot represent is never dropped
// silently: the translation fails with an *Error naming the offending field,
// which the gateway turns into a 400. The few fields that are accepted
// without an equivalent are hints with no effect on what the model
// generates; each is listed where it is handled:
//
//   - Anthropic cache_control (prompt caching) on blocks, tools and system;
//   - OpenAI image_url.detail, stream_options (the caller passes
//     include_usage to StreamToOpenAI itself).
//
// Mapping decisions that are not one-to-one:
//
//   - Anthropic top_k is sent to OpenAI-compatible upstreams as the top_k
//     extension that vLLM and most self-hosted servers accept (OpenAI itself
//     rejects it, which is a clear upstream 400, not a silent drop); an
//     OpenAI top_k extension is likewise sent to Anthropic as top_k.
//   - Anthropic max_tokens is required: ToAnthropic uses max_completion_tokens,
//     else max_tokens, else DefaultMaxTokens.
//   - OpenAI has no is_error flag on tool results: an Anthropic tool_result
//     with is_error true becomes a tool message whose text starts with
//     "Error: ".
//   - OpenAI system and developer messages anywhere in the conversation are
//     gathered, in order, into the Anthropic system prompt.
//   - Anthropic stop_reason "stop_sequence" comes from an OpenAI "stop" only
//     when the upstream names the matched string in the vLLM stop_reason
//     extension; otherwise "stop" is "end_turn".
//   - content_filter <-> refusal; Anthropic pause_turn -> stop and
//     model_context_window_exceeded -> length.
//   - Usage: input_tokens <-> prompt_tokens and output_tokens <->
//     completion_tokens. Anthropic cache read and cache creation tokens are
//     added into prompt_tokens (OpenAI counts cached tokens as prompt tokens)
//     and cache reads are reported as prompt_tokens_details.cached_tokens.
package anthropic

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// DefaultMaxTokens is the max_tokens ToAnthropic sends when the OpenAI
// request sets none: Anthropic requires the field, OpenAI does not.
const DefaultMaxTokens = 4096

// Error is a translation failure the client caused: Field names the offending
// field (e.g. "messages[2].content[0].type"), Message says why. The gateway
// turns it into a 400. Code is empty for a feature the other API cannot
// represent (or a malformed field), CodeTooManyBlocks for a request over
// MaxBlocks. A client's value named in Field or Message (an unknown key, a
// block type) is repeated whole up to 100 bytes, else cut there with "...".
type Error struct{ Field, Message, Code string }

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Usage is the token usage of one exchange. InputTokens includes cached
// prompt tokens.
type Usage struct{ InputTokens, OutputTokens int }

// now is the clock behind the "created" field of OpenAI responses; tests
// replace it.
var now = time.Now

// newID returns a random id with the given prefix, for responses whose
// upstream gave none.
var newID = func(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func errf(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

// isNull reports whether raw is absent or the JSON null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// kind names the JSON type of raw, for error messages.
func kind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// marshal encodes v without HTML escaping, so that text passes through as
// written.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// compactJSON returns raw compacted, for tool arguments sent as a string.
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// isJSONObject reports whether s is a valid JSON object.
func isJSONObject(s []byte) bool {
	s = bytes.TrimSpace(s)
	return len(s) > 0 && s[0] == '{' && json.Valid(s)
}
