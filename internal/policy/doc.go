// Package policy applies a route's router-owned policy (SPEC §6, design 003)
// to a request before it is forwarded: tool and media permission, the
// output-token ceiling, context admission against the pool's context
// length, and the per-replica in-flight limit.
//
// Inspect reads what admission needs from the request body in one pass, in
// place: top-level members it does not need are skipped, and message text is
// counted where it lies, never copied or decoded into Go values. Admit then
// applies the policy and, when a ceiling applies, rewrites only the value
// bytes of the output-limit member (or inserts one); every other byte of the
// body reaches the upstream as the client wrote it. The gateway, which walks
// the body once for its own members too, uses the parts: an Inspector fed
// each top-level member of that walk, and Decide, which returns the clamp's
// edits for the gateway's one splice instead of a new body. Limiter counts
// requests in flight.
//
// # The prompt lower bound
//
// Context admission refuses a request whose output limit plus its prompt
// exceeds the context. The gateway has no tokenizer, and a request that
// would fit must never be refused, so the prompt is measured by a number
// that is at most its token count under every mainstream tokenizer: the
// number of visible fields of the text the model reads. A field is a
// maximal run of characters other than the space U+0020; it is visible when
// it holds a letter, digit, punctuation or symbol character (Unicode L, N,
// P, S).
//
// Why every visible field is at least one token of its own:
//
//   - Byte-level BPE with regex pre-tokenization (GPT-2, cl100k and o200k
//     as in tiktoken, Llama 3, Qwen 2 and 3, Mistral Tekken, DeepSeek):
//     the text is first split into pieces by a regex, and BPE merges only
//     within a piece. Every alternative of those regexes matches either
//     whitespace only, or a run with at most one leading whitespace
//     character (" ?\p{L}+", "[^\r\n\p{L}\p{N}]?\p{L}+", " ?[^\s\p{L}\p{N}]+[\r\n]*",
//     ...); none matches non-space, space, non-space. So two fields never
//     share a piece, every non-empty piece is at least one token, and
//     byte-level encoding drops no character.
//   - SentencePiece with whitespace splitting (Llama 2, Mistral v1-v3,
//     Gemma): spaces become "▁", and a piece may hold "▁" only at its start
//     or consist of "▁" only, so no piece spans two fields; byte fallback
//     (or <unk>) gives every character at least one token.
//   - Only U+0020 separates fields. SentencePiece does not split at tabs or
//     newlines (a piece such as "}\n}" can exist), so counting a field
//     break there could overcount; not breaking there only undercounts.
//   - Only visible characters make a field count. Normalizers (NFKC in
//     SentencePiece's nmt_nfkc, BERT's clean-up for embedding models) may
//     delete control, format, private-use and unassigned characters, so a
//     field made only of those might become no token; a letter, digit,
//     punctuation or symbol is never deleted (NFKC maps it to at least one
//     character, accent stripping keeps the base letter).
//   - Text that spells a special token becomes one token: still one for its
//     field.
//
// Example: "Hello, world!" has 2 fields; Llama 3 and cl100k encode it as 4
// tokens ("Hello" "," " world" "!"), Llama 2 as 4 plus BOS. A single 100 KB
// word, or a paragraph of Chinese without spaces, is one field: the bound is
// weak there but never wrong. For English prose (about 1.3 tokens per word)
// it is about three quarters of the true count.
//
// # From messages to the prompt
//
// The prompt of a chat request is the chat template's rendering of the
// messages. A template adds text and special tokens, which only add tokens,
// but it may place two strings side by side with nothing between them
// (content parts of one message are often concatenated), which can merge
// the last field of one with the first field of the next, and it may
// reorder them (Mistral moves the system prompt into the last user turn).
// So each string counts its fields minus one, and one is added for the
// whole prompt when any string has a visible field: whatever the order and
// the glue, each space run inside a string that separates two visible
// fields still separates them in the rendering.
//
// Only text that every mainstream template renders is counted:
//
//   - user messages (a text content part counts when its type is "text",
//     "input_text" or "output_text"; image, audio and file parts count 0);
//   - assistant messages without "tool_calls" or "function_call" (Llama 3.1
//     and Mistral templates render the calls instead of the content; also
//     Anthropic assistant turns with tool_use blocks, Responses assistant
//     messages when the input holds a function_call item), and of those
//     only the text after the last "</think>" (Qwen3 and DeepSeek-R1
//     templates drop the reasoning of earlier turns);
//   - the first message if it is a system message (the Responses
//     "instructions", the Anthropic "system"), and only when the last
//     message is a user message (Mistral v0.3's template renders the system
//     prompt only inside a final user turn).
//
// Not counted: tool results, developer messages and later system messages
// (Llama 2's template silently drops roles it does not know), tool-call
// arguments and names (Gemma's and Llama 2's templates ignore tool calls),
// reasoning fields, tool definitions (vLLM may leave them out with
// tool_choice "none"). A request that sends its own "chat_template" gets a
// bound of 0, as does one with vLLM's truncate_prompt_tokens other than a
// positive k (which caps the bound at k) and a Responses request with
// "truncation" other than "disabled". With previous_response_id or
// conversation the instructions are not counted.
//
// /completions and /embeddings: a string prompt counts its fields (no
// template); an array of token ids counts exactly one per id; an array of
// prompts holds separate sequences, so the bound is that of the longest.
//
// # Media and tools
//
// HasMedia is set by a content part (in any message, or nested in a tool
// result or Responses tool output) whose type is an image, audio or video
// type (image_url, input_image, image, image_file, image_embeds, input_audio,
// audio, audio_url, video_url, video, input_video, computer_screenshot, and
// vLLM's image_pil), by a part without a type that carries one of vLLM's
// media members (image_url, audio_url, input_audio, video_url,
// image_embeds), and by a file part (file, input_file, document) that shows
// an image, audio or video data: URL, MIME type or file name extension. A
// file part without such evidence (a PDF, a bare file_id) is not media.
// HasTools is a "tools" or "functions" member that is neither null nor [].
//
// # Output limit and context admission
//
// The ceiling (max_output_tokens of the route) is both the default and the
// clamp. The upstream reads max_completion_tokens before max_tokens on
// /chat/completions and skips a 0 there (vLLM: "max_completion_tokens or
// max_tokens"), so a 0 or null limit counts as none except on /completions,
// where max_tokens 0 means "score the prompt, generate nothing". llama.cpp's
// n_predict, which it reads before max_tokens and where -1 means unlimited,
// is clamped too. Admission uses the limit the upstream will apply (the
// client's, the ceiling, or 0 when neither is known) plus the prompt's lower
// bound.
package policy
