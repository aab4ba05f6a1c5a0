package demo

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
)

type embeddingBody struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func embeddings(t *testing.T, ts *httptest.Server, body string) embeddingBody {
	t.Helper()
	resp, raw := do(t, ts, http.MethodPost, "/v1/embeddings", body, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, raw)
	}
	var got embeddingBody
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Object != "list" || got.Model != "emb-model" || got.Usage.PromptTokens < len(got.Data) ||
		got.Usage.TotalTokens != got.Usage.PromptTokens {
		t.Errorf("envelope: %s", raw)
	}
	for i, d := range got.Data {
		if d.Object != "embedding" || d.Index != i {
			t.Errorf("data[%d]: %s", i, raw)
		}
	}
	return got
}

func floats(t *testing.T, raw json.RawMessage) []float32 {
	t.Helper()
	var v []float32
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("embedding %s: %v", raw, err)
	}
	return v
}

func TestEmbeddings(t *testing.T) {
	ts := newServer(t, Options{})

	one := embeddings(t, ts, `{"model":"emb-model","input":"hello"}`)
	many := embeddings(t, ts, `{"model":"emb-model","input":["hello","world","hello"]}`)
	b64 := embeddings(t, ts, `{"model":"emb-model","input":["hello"],"encoding_format":"base64"}`)
	if len(one.Data) != 1 || len(many.Data) != 3 || len(b64.Data) != 1 {
		t.Fatalf("data lengths %d %d %d", len(one.Data), len(many.Data), len(b64.Data))
	}

	hello := floats(t, one.Data[0].Embedding)
	if len(hello) != embeddingDims {
		t.Fatalf("dims = %d", len(hello))
	}
	var norm float64
	for _, f := range hello {
		norm += float64(f) * float64(f)
	}
	if math.Abs(norm-1) > 1e-4 {
		t.Errorf("|v|^2 = %v, want 1", norm)
	}
	eq := func(a, b []float32) bool {
		return len(a) == len(b) && string(mustJSON(a)) == string(mustJSON(b))
	}
	if !eq(hello, floats(t, many.Data[0].Embedding)) || !eq(hello, floats(t, many.Data[2].Embedding)) {
		t.Error("same input, different vectors")
	}
	if eq(hello, floats(t, many.Data[1].Embedding)) {
		t.Error("different inputs, same vector")
	}

	var s string
	if err := json.Unmarshal(b64.Data[0].Embedding, &s); err != nil {
		t.Fatalf("base64 embedding is not a string: %s", b64.Data[0].Embedding)
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw) != 4*embeddingDims {
		t.Fatalf("base64 embedding %q: %v", s, err)
	}
	dec := make([]float32, embeddingDims)
	for i := range dec {
		dec[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	if !eq(hello, dec) {
		t.Errorf("base64 %v != float %v", dec, hello)
	}
}
