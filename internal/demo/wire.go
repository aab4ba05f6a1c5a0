package demo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "request_too_large",
				fmt.Sprintf("request body exceeds %d bytes", maxBodyBytes))
		} else {
			writeInvalid(w, "cannot read request body: "+err.Error())
		}
		return nil, false
	}
	if len(body) == 0 {
		writeInvalid(w, "request body is required")
		return nil, false
	}
	return body, true
}

// modelRequest is a request body that names its model.
type modelRequest interface{ model() string }

// readRequest reads the body and decodes it into req, which must name a
// model. Otherwise it answers 400 (413 for a body too large) and reports
// false.
func readRequest(w http.ResponseWriter, r *http.Request, req modelRequest) ([]byte, bool) {
	body, ok := readBody(w, r)
	if !ok {
		return nil, false
	}
	if err := json.Unmarshal(body, req); err != nil {
		writeInvalid(w, "invalid JSON body: "+err.Error())
		return nil, false
	}
	if req.model() == "" {
		writeInvalid(w, "model is required")
		return nil, false
	}
	return body, true
}

// OpenAI wire shapes.

type apiError struct {
	Error apiErrorBody `json:"error"`
}

type apiErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}

type modelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type completionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   usage              `json:"usage"`
}

type completionChoice struct {
	Index        int          `json:"index"`
	Message      *chatMessage `json:"message,omitempty"`
	Text         *string      `json:"text,omitempty"`
	Logprobs     any          `json:"logprobs"`
	FinishReason string       `json:"finish_reason"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type embeddingResponse struct {
	ID      string      `json:"id"`
	Object  string      `json:"object"`
	Created int64       `json:"created"`
	Model   string      `json:"model"`
	Data    []embedding `json:"data"`
	Usage   struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

type embedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
}

func writeInvalid(w http.ResponseWriter, msg string) {
	writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", msg)
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	writeBody(w, status, mustJSON(apiError{Error: apiErrorBody{Message: msg, Type: typ, Code: code}}))
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// mustJSON marshals values whose types cannot fail to encode (no channels,
// funcs or cyclic data), so an error here is a programming mistake.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("demo: " + err.Error())
	}
	return b
}
