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
// turns it into a 400.
type Error struct{ Field, Message string }

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

// obj is a JSON object whose values are decoded on demand.
type obj map[string]json.RawMessage

// isNull reports whether raw is absent or the JSON null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

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

// decodeObj decodes raw as a JSON object. Keys that hold null are removed,
// so that an explicit null reads as an absent field everywhere.
func decodeObj(raw json.RawMessage, path string) (obj, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '{' {
		return nil, errf(path, "must be an object, not %s", kind(raw))
	}
	var o obj
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, errf(path, "invalid JSON: %v", err)
	}
	for k, v := range o {
		if isNull(v) {
			delete(o, k)
		}
	}
	return o, nil
}

// checkKeys rejects any key of o outside allowed, so that no field is
// dropped without a decision.
func (o obj) checkKeys(path string, allowed ...string) error {
	var bad []string
	for k := range o {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	// Report the smallest key so that the message is deterministic.
	k := bad[0]
	for _, b := range bad[1:] {
		if b < k {
			k = b
		}
	}
	return errf(join(path, k), "is not supported by this translation")
}

func (o obj) has(key string) bool { _, ok := o[key]; return ok }

func (o obj) str(key, path string) (string, bool, error) {
	raw, ok := o[key]
	if !ok {
		return "", false, nil
	}
	var s string
	if len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false, errf(join(path, key), "must be a string, not %s", kind(raw))
	}
	return s, true, nil
}

func (o obj) reqStr(key, path string) (string, error) {
	s, ok, err := o.str(key, path)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", errf(join(path, key), "is required")
	}
	return s, nil
}

func (o obj) boolean(key, path string) (bool, bool, error) {
	raw, ok := o[key]
	if !ok {
		return false, false, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, false, errf(join(path, key), "must be a boolean, not %s", kind(raw))
	}
	return b, true, nil
}

// number returns the raw JSON of a numeric field, validated.
func (o obj) number(key, path string) (json.RawMessage, bool, error) {
	raw, ok := o[key]
	if !ok {
		return nil, false, nil
	}
	var f float64
	if kind(raw) != "a number" || json.Unmarshal(raw, &f) != nil {
		return nil, false, errf(join(path, key), "must be a number, not %s", kind(raw))
	}
	return json.RawMessage(bytes.TrimSpace(raw)), true, nil
}

func (o obj) integer(key, path string) (int64, bool, error) {
	raw, ok := o[key]
	if !ok {
		return 0, false, nil
	}
	var n int64
	if kind(raw) != "a number" || json.Unmarshal(raw, &n) != nil {
		return 0, false, errf(join(path, key), "must be an integer, not %s", kind(raw))
	}
	return n, true, nil
}

func (o obj) array(key, path string) ([]json.RawMessage, bool, error) {
	raw, ok := o[key]
	if !ok {
		return nil, false, nil
	}
	var a []json.RawMessage
	if kind(raw) != "an array" || json.Unmarshal(raw, &a) != nil {
		return nil, false, errf(join(path, key), "must be an array, not %s", kind(raw))
	}
	return a, true, nil
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
