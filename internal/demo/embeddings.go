package demo

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"
)

type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
}

func (r *embeddingRequest) model() string { return r.Model }

func (h *handler) serveEmbeddings(w http.ResponseWriter, r *http.Request, cfg reqConfig) {
	var req embeddingRequest
	if _, ok := readRequest(w, r, &req); !ok {
		return
	}
	// Dispatch on the first byte: unmarshalling null into either Go type
	// succeeds silently, and a missing input must still be a 400.
	var inputs []string
	var err error
	switch {
	case len(req.Input) > 0 && req.Input[0] == '"':
		var one string
		err = json.Unmarshal(req.Input, &one)
		inputs = []string{one}
	case len(req.Input) > 0 && req.Input[0] == '[':
		err = json.Unmarshal(req.Input, &inputs)
	}
	if err != nil || len(inputs) == 0 {
		writeInvalid(w, "input must be a string or a non-empty array of strings")
		return
	}
	// The official OpenAI Python SDK asks for base64 unless told otherwise,
	// so supporting it is what makes the demo work with that SDK's defaults.
	b64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		writeInvalid(w, `encoding_format must be "float" or "base64"`)
		return
	}
	if !begin(r, cfg) {
		return
	}

	resp := embeddingResponse{
		ID:      "embd-demo-" + strconv.FormatUint(h.seq.Add(1), 10),
		Object:  "list",
		Created: time.Now().Unix(),
		Model:   req.Model,
		Data:    make([]embedding, len(inputs)),
	}
	for i, in := range inputs {
		vec := embed(in)
		resp.Data[i] = embedding{Object: "embedding", Index: i, Embedding: vec}
		if b64 {
			raw := make([]byte, 4*len(vec))
			for j, f := range vec {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(f))
			}
			resp.Data[i].Embedding = base64.StdEncoding.EncodeToString(raw)
		}
		resp.Usage.PromptTokens += max(len(in)/4, 1)
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	writeBody(w, http.StatusOK, mustJSON(resp))
}

// embed derives a unit vector from the input's hash: deterministic, so tests
// and caches can compare results, and normalised like real embedding models
// so cosine similarity behaves.
func embed(s string) []float32 {
	f := fnv.New64a()
	_, _ = io.WriteString(f, s)
	x := f.Sum64()
	vec := make([]float32, embeddingDims)
	var norm float64
	for i := range vec {
		// splitmix64: cheap, well-mixed successive values from one seed.
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		v := float64(z>>11)/(1<<53)*2 - 1
		vec[i] = float32(v)
		norm += v * v
	}
	if norm = math.Sqrt(norm); norm > 0 {
		for i := range vec {
			vec[i] = float32(float64(vec[i]) / norm)
		}
	}
	return vec
}
