package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestInspect(t *testing.T) {
	const chat, compl, resp, emb, msgs = "/chat/completions", "/completions", "/responses", "/embeddings", "/messages"
	tests := []struct {
		name     string
		endpoint string
		body     string
		want     Request
	}{
		// Chat: string content. System "You are helpful." (3 fields) and
		// user "Hello, world!" (2 fields): 2 + 1 gaps, plus one.
		{"chat string content", chat,
			`{"model":"m","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"Hello, world!"}],"max_tokens":100}`,
			Request{MaxTokens: 100, PromptLowerBound: 4}},
		{"chat v1 prefix", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"one two three"}]}`,
			Request{PromptLowerBound: 3}},
		{"chat empty", chat, `{}`, Request{}},
		{"chat null content", chat, `{"messages":[{"role":"user","content":null}]}`, Request{}},
		{"chat text and image_url parts", chat,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"What is in this image?"},{"type":"image_url","image_url":{"url":"https://x/cat.png"}}]}]}`,
			Request{HasMedia: true, PromptLowerBound: 5}},
		{"chat key order: text before type", chat,
			`{"messages":[{"content":[{"text":"a b c","type":"text"}],"role":"user"}]}`,
			Request{PromptLowerBound: 3}},
		{"chat two text parts glued", chat,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"a b"},{"type":"text","text":"c d"}]}]}`,
			// "a bc d" is the worst gluing: 3 fields.
			Request{PromptLowerBound: 3}},
		{"chat input_audio part", chat,
			`{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}},{"type":"text","text":"transcribe"}]}]}`,
			Request{HasMedia: true, PromptLowerBound: 1}},
		{"chat vLLM untyped image part", chat,
			`{"messages":[{"role":"user","content":[{"image_url":"https://x/a.jpg"}]}]}`,
			Request{HasMedia: true}},
		{"chat video_url part", chat,
			`{"messages":[{"role":"user","content":[{"type":"video_url","video_url":{"url":"https://x/v"}}]}]}`,
			Request{HasMedia: true}},
		{"chat file part pdf is not media", chat,
			`{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBER","filename":"a.pdf"}}]}]}`,
			Request{}},
		{"chat file part with image data", chat,
			`{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"DATA:image\/png;base64,iVBOR"}}]}]}`,
			Request{HasMedia: true}},
		{"chat file part with image name", chat,
			`{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"f1","filename":"Scan.JPEG"}}]}]}`,
			Request{HasMedia: true}},
		{"chat text part mentioning image_url is text", chat,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"image_url","image_url":"x"}]}]}`,
			Request{PromptLowerBound: 1}},
		{"chat media in a tool message", chat,
			`{"messages":[{"role":"tool","tool_call_id":"1","content":[{"type":"image_url","image_url":{"url":"u"}}]}]}`,
			Request{HasMedia: true}},
		{"chat tools", chat, `{"tools":[{"type":"function","function":{"name":"f"}}],"messages":[]}`, Request{HasTools: true}},
		{"chat empty tools", chat, `{"tools":[ ],"messages":[]}`, Request{}},
		{"chat null tools", chat, `{"tools":null,"functions":null}`, Request{}},
		{"chat legacy functions", chat, `{"functions":[{"name":"f"}]}`, Request{HasTools: true}},
		{"chat tool_choice alone", chat, `{"tool_choice":"auto"}`, Request{}},
		{"max_completion_tokens wins", chat, `{"max_tokens":100,"max_completion_tokens":50}`, Request{MaxTokens: 50}},
		{"max_completion_tokens 0 falls through", chat, `{"max_completion_tokens":0,"max_tokens":100}`, Request{MaxTokens: 100}},
		{"max_completion_tokens null falls through", chat, `{"max_completion_tokens":null,"max_tokens":70}`, Request{MaxTokens: 70}},
		{"integral float", chat, `{"max_tokens":100.0}`, Request{MaxTokens: 100}},
		{"exponent", chat, `{"max_tokens":1e3}`, Request{MaxTokens: 1000}},
		{"saturates", chat, `{"max_tokens":123456789012345678901234567890}`, Request{MaxTokens: maxCount}},
		{"saturates float", chat, `{"max_tokens":1e400}`, Request{MaxTokens: maxCount}},
		{"underflow is 0, as in Python", chat, `{"max_tokens":1e-400}`, Request{}},
		{"max_output_tokens ignored on chat", chat, `{"max_output_tokens":"x"}`, Request{}},
		{"repeated key: last wins", chat, `{"max_tokens":1,"max_tokens":2}`, Request{MaxTokens: 2}},
		{"escaped key", chat, `{"max_\u0074okens":9}`, Request{MaxTokens: 9}},

		// What the templates drop.
		{"think stripped", chat,
			`{"messages":[{"role":"user","content":"2+2?"},{"role":"assistant","content":"<think>a b c d e f</think>The answer is 4."},{"role":"user","content":"ok"}]}`,
			// user 1 + 1 fields, assistant "The answer is 4." 4 fields.
			Request{PromptLowerBound: 4}},
		{"think across parts", chat,
			`{"messages":[{"role":"assistant","content":[{"type":"text","text":"a b c </thi"},{"type":"text","text":"nk> d e"}]}]}`,
			Request{PromptLowerBound: 2}},
		{"assistant with tool_calls not counted", chat,
			`{"messages":[{"role":"user","content":"w x"},{"role":"assistant","content":"a b c d","tool_calls":[]}]}`,
			Request{PromptLowerBound: 2}},
		{"assistant with null tool_calls counted", chat,
			`{"messages":[{"role":"user","content":"w x"},{"role":"assistant","content":"a b c d","tool_calls":null}]}`,
			Request{PromptLowerBound: 5}},
		{"tool and developer not counted", chat,
			`{"messages":[{"role":"developer","content":"a b c"},{"role":"tool","content":"d e f"},{"role":"user","content":"g"}]}`,
			Request{PromptLowerBound: 1}},
		{"later system not counted", chat,
			`{"messages":[{"role":"user","content":"g"},{"role":"system","content":"a b c"},{"role":"user","content":"h"}]}`,
			Request{PromptLowerBound: 1}},
		{"system not counted when last is assistant", chat,
			`{"messages":[{"role":"system","content":"a b c"},{"role":"user","content":"g"},{"role":"assistant","content":"h"}]}`,
			Request{PromptLowerBound: 1}},
		{"role is case sensitive", chat,
			`{"messages":[{"role":"User","content":"a b c"}]}`,
			Request{}},
		{"repeated content: last wins", chat,
			`{"messages":[{"role":"user","content":"a b c d e","content":"x"}]}`,
			Request{PromptLowerBound: 1}},
		{"repeated text: last wins", chat,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"a b c d e","text":"x"}]}]}`,
			Request{PromptLowerBound: 1}},
		{"chat_template in request", chat,
			`{"chat_template":"{{ '' }}","messages":[{"role":"user","content":"a b c"}]}`,
			Request{}},
		{"truncate_prompt_tokens caps", chat,
			`{"truncate_prompt_tokens":2,"messages":[{"role":"user","content":"a b c d"}]}`,
			Request{PromptLowerBound: 2}},
		{"truncate_prompt_tokens -1", chat,
			`{"truncate_prompt_tokens":-1,"messages":[{"role":"user","content":"a b c d"}]}`,
			Request{}},

		// Field splitting.
		{"escaped space splits", chat, `{"messages":[{"role":"user","content":"a\u0020b"}]}`, Request{PromptLowerBound: 2}},
		{"newline and tab do not split", chat, `{"messages":[{"role":"user","content":"a\nb\tc\r\nd"}]}`, Request{PromptLowerBound: 1}},
		{"no-break space does not split", chat, `{"messages":[{"role":"user","content":"a\u00a0b c"}]}`, Request{PromptLowerBound: 2}},
		{"invisible fields", chat, `{"messages":[{"role":"user","content":"a \u200b \u0001 \ud800 b"}]}`, Request{PromptLowerBound: 2}},
		{"surrogate pair is visible", chat, `{"messages":[{"role":"user","content":"\ud83d\ude00 x"}]}`, Request{PromptLowerBound: 2}},
		{"runs of spaces", chat, `{"messages":[{"role":"user","content":"   a    b   "}]}`, Request{PromptLowerBound: 2}},

		// Responses.
		{"responses string input", resp,
			`{"model":"m","instructions":"Be brief.","input":"Tell me a joke.","max_output_tokens":256}`,
			// 4 fields + 2 fields: 3 + 1 gaps, plus one.
			Request{MaxTokens: 256, PromptLowerBound: 5}},
		{"responses items", resp,
			`{"input":[{"role":"user","content":[{"type":"input_text","text":"Describe this"},{"type":"input_image","image_url":"data:image/png;base64,AAA"}]},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"A red car."}]},{"role":"user","content":"More detail"}]}`,
			Request{HasMedia: true, PromptLowerBound: 5}},
		{"responses function_call drops assistant text", resp,
			`{"input":[{"role":"user","content":"hi there"},{"type":"message","role":"assistant","content":"a b c d"},{"type":"function_call","call_id":"c","name":"f","arguments":"{\"x\": 1}"},{"type":"function_call_output","call_id":"c","output":"e f g"}]}`,
			Request{PromptLowerBound: 2}},
		{"responses tool output image", resp,
			`{"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"https://x"}]}]}`,
			Request{HasMedia: true}},
		{"responses input_file pdf", resp,
			`{"input":[{"role":"user","content":[{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,AA"}]}]}`,
			Request{}},
		{"responses truncation auto", resp, `{"truncation":"auto","input":"a b c"}`, Request{}},
		{"responses truncation disabled", resp, `{"truncation":"disabled","input":"a b c"}`, Request{PromptLowerBound: 3}},
		{"responses previous_response_id drops instructions", resp,
			`{"previous_response_id":"r","instructions":"a b c d","input":"x y"}`, Request{PromptLowerBound: 2}},
		{"responses tools", resp, `{"tools":[{"type":"web_search"}],"input":"x"}`, Request{HasTools: true, PromptLowerBound: 1}},
		{"responses max_tokens ignored", resp, `{"max_tokens":5}`, Request{}},

		// Completions.
		{"completions string", compl, `{"prompt":"Once upon a time","max_tokens":16}`, Request{MaxTokens: 16, PromptLowerBound: 4}},
		{"completions array of strings: longest", compl, `{"prompt":["a b","c d e f","g"]}`, Request{PromptLowerBound: 4}},
		{"completions token ids", compl, `{"prompt":[1,2,3,4,5,6,7]}`, Request{PromptLowerBound: 7}},
		{"completions arrays of token ids", compl, `{"prompt":[[1,2],[3,4,5],[6]]}`, Request{PromptLowerBound: 3}},
		{"completions max_tokens 0", compl, `{"prompt":"a","max_tokens":0,"echo":true}`, Request{PromptLowerBound: 1}},
		{"completions no think stripping", compl, `{"prompt":"a b </think> c"}`, Request{PromptLowerBound: 4}},

		// Embeddings.
		{"embeddings", emb, `{"input":["a b c","d"]}`, Request{PromptLowerBound: 3}},
		{"embeddings chat", emb, `{"messages":[{"role":"user","content":"a b"}]}`, Request{PromptLowerBound: 2}},
		{"embeddings chat_template", emb, `{"chat_template":"x","messages":[{"role":"user","content":"a b"}]}`, Request{}},
		{"embeddings ids", emb, `{"input":[[5,6,7,8]],"max_tokens":9}`, Request{PromptLowerBound: 4}},

		// Anthropic.
		{"messages", msgs,
			`{"max_tokens":1024,"system":"Be nice.","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA"}}]}]}`,
			Request{MaxTokens: 1024, HasMedia: true, PromptLowerBound: 4}},
		{"messages tool_use", msgs,
			`{"max_tokens":10,"tools":[{"name":"f"}],"messages":[{"role":"user","content":"x y"},{"role":"assistant","content":[{"type":"text","text":"a b c"},{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}]}`,
			Request{MaxTokens: 10, HasTools: true, HasMedia: true, PromptLowerBound: 2}},
		{"messages system blocks", msgs,
			`{"system":[{"type":"text","text":"a b"}],"messages":[{"role":"user","content":"c"}]}`,
			Request{PromptLowerBound: 2}},

		{"unknown endpoint", "/audio/speech", `{"input":"a b c","tools":[1]}`, Request{HasTools: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Inspect([]byte(tc.body), tc.endpoint)
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if got != tc.want {
				t.Fatalf("Inspect(%s)\n got %+v\nwant %+v", tc.body, got, tc.want)
			}
		})
	}
}

func TestInspectErrors(t *testing.T) {
	tests := []struct {
		endpoint, body, code string
	}{
		{"/chat/completions", `{"max_tokens":"100"}`, "invalid_value"},
		{"/chat/completions", `{"max_tokens":-1}`, "invalid_value"},
		{"/chat/completions", `{"max_completion_tokens":1.5}`, "invalid_value"},
		{"/chat/completions", `{"max_tokens":true}`, "invalid_value"},
		{"/responses", `{"max_output_tokens":[1]}`, "invalid_value"},
		{"/completions", `{"max_tokens":{}}`, "invalid_value"},
		{"/chat/completions", ``, "invalid_json"},
		{"/chat/completions", `[]`, "invalid_json"},
		{"/chat/completions", `{"messages":[{"role":"user","content":"a}]}`, "invalid_json"},
		{"/chat/completions", `{"messages":[{"role":"user","content":"a\x"}]}`, "invalid_json"},
		{"/chat/completions", "{\"messages\":\"a\x01\"}", "invalid_json"},
		{"/chat/completions", `{"a":01}`, "invalid_json"},
		{"/chat/completions", `{"a":1} x`, "invalid_json"},
		{"/chat/completions", `{"a":1,}`, "invalid_json"},
		{"/chat/completions", `{"a":nul}`, "invalid_json"},
		{"/chat/completions", strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001), "invalid_json"},
	}
	for _, tc := range tests {
		_, err := Inspect([]byte(tc.body), tc.endpoint)
		var r *Refusal
		if !errors.As(err, &r) || r.Code != tc.code || r.Status != 400 {
			t.Errorf("Inspect(%.60q) error %v, want a 400 %s refusal", tc.body, err, tc.code)
		}
	}
	// Deep but within encoding/json's limit is fine.
	deep := `{"x":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}`
	if _, err := Inspect([]byte(deep), "/chat/completions"); err != nil {
		t.Errorf("deep body: %v", err)
	}
}
