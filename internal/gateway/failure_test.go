package gateway

import "testing"

// TestModelGoneNeedsAStructuredAnswer: only an upstream's own structured
// "no such model" answer about the model sent marks a target stale; text a
// caller can make an upstream echo never does.
func TestModelGoneNeedsAStructuredAnswer(t *testing.T) {
	const m = "Qwen/Qwen3-8B"
	for _, c := range []struct {
		name   string
		status int
		body   string
		want   bool
	}{
		{"vllm", 404, `{"object":"error","message":"The model ` + "`" + m + "`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`, true},
		{"vllm wrapped", 404, `{"error":{"message":"The model ` + "`" + m + "`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}}`, true},
		{"openai", 404, `{"error":{"message":"The model ` + "`" + m + "`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`, true},
		{"anthropic", 404, `{"type":"error","error":{"type":"not_found_error","message":"model: ` + m + `"}}`, true},
		{"another model", 404, `{"object":"error","message":"The model ` + "`other`" + ` does not exist.","type":"NotFoundError","param":null,"code":404}`, false},
		{"previous response echo", 404, `{"error":{"message":"Previous response with id 'model ` + "`" + m + "`" + ` does not exist' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`, false},
		{"not-found echo", 404, `{"object":"error","message":"Response with id 'The model ` + "`" + m + "`" + ` does not exist.' not found","type":"NotFoundError","param":null,"code":404}`, false},
		{"400 free text", 400, `{"object":"error","message":"The model ` + "`" + m + "`" + ` does not exist.","type":"BadRequestError","param":null,"code":400}`, false},
		{"plain text", 404, `model_not_found: The model ` + "`" + m + "`" + ` does not exist.`, false},
		{"code without the model", 404, `{"error":{"message":"nothing here","code":"model_not_found"}}`, false},
	} {
		if got := modelGone(c.status, []byte(c.body), m); got != c.want {
			t.Errorf("%s: modelGone = %v, want %v", c.name, got, c.want)
		}
	}
}
