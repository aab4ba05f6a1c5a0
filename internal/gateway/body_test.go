package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/rolter/rolter/internal/jsonscan"
	"github.com/rolter/rolter/internal/policy"
	"github.com/rolter/rolter/internal/store"
)

// refRequestUsage is the usage option as the gateway made it before the
// one-pass body (a copy of the body per edit), the reference for splice.
func refRequestUsage(body []byte, endpoint string) ([]byte, bool) {
	if endpoint != "/chat/completions" && endpoint != "/completions" {
		return body, false
	}
	s, e, found, err := jsonscan.LocateKey(body, "stream_options")
	if err != nil {
		return body, false
	}
	if !found {
		i := bytes.IndexByte(body, '{')
		out := append(append(append([]byte{}, body[:i+1]...), usageOption...), body[i+1:]...)
		return out, true
	}
	opts := map[string]json.RawMessage{}
	if v := bytes.TrimSpace(body[s:e]); string(v) != "null" && (json.Unmarshal(v, &opts) != nil || opts == nil) {
		return body, false
	}
	if string(bytes.TrimSpace(opts["include_usage"])) == "true" {
		return body, false
	}
	opts["include_usage"] = json.RawMessage("true")
	merged, _ := json.Marshal(opts)
	return append(append(append([]byte{}, body[:s]...), merged...), body[e:]...), true
}

// TestSpliceMatchesSteps checks that the one walk and one splice give, byte
// for byte, what the separate steps gave: policy.Admit's clamp, then the
// usage option, then the model rewrite.
func TestSpliceMatchesSteps(t *testing.T) {
	bodies := []string{
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi there"}]}`,
		`{"model":"m","stream":true,"max_tokens":9000,"messages":[]}`,
		` { "stream" : true , "model" : "m" , "max_completion_tokens" : 0, "max_tokens": null, "n_predict": -1 } `,
		`{"model":"m","stream":true,"stream_options":null,"max_tokens":10}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":false,"continuous_usage_stats":true}}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":5000}`,
		`{"model":"m","stream":true,"stream_options":"x"}`,
		`{"mod\u0065l":"m","stream":true,"max_tokens":1e5}`,
		`{"model":"m","stream":false,"prompt":"a b c","max_tokens":0}`,
	}
	for _, ep := range []string{"/chat/completions", "/completions", "/responses", "/messages"} {
		for _, ceiling := range []int{0, 100} {
			for _, b := range bodies {
				body := []byte(b)
				p := store.Policy{MaxOutputTokens: ceiling}
				var rb requestBody
				if err := rb.scan(body, ep); err != nil {
					t.Fatalf("%s: %v", b, err)
				}
				req, err := rb.inspect.Request()
				if err != nil {
					continue // refused alike either way (TestInspectErrors)
				}
				clamp, ref := policy.Decide(req, rb.inspect.Limits(), p, 0)
				want, ref2 := policy.Admit(body, ep, req, p, 0)
				if (ref == nil) != (ref2 == nil) {
					t.Fatalf("%s %s: Decide refused %v, Admit %v", ep, b, ref, ref2)
				}
				if ref != nil {
					continue
				}
				added := false
				if rb.stream {
					var refAdded bool
					want, refAdded = refRequestUsage(want, ep)
					if added = rb.usageEdit(ep); added != refAdded {
						t.Fatalf("%s %s: usage added %v, want %v", ep, b, added, refAdded)
					}
				}
				want, _, _ = jsonscan.Set(nil, want, "upstream/model")
				got, err := io.ReadAll(rb.splice("upstream/model", &clamp))
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s ceiling %d %s:\n got %s\nwant %s", ep, ceiling, b, got, want)
				}
			}
		}
	}
}

// TestSpliceReusesBuffer: each attempt's body is built in the same buffer,
// and a reader of an earlier attempt fails instead of reading the next.
func TestSpliceReusesBuffer(t *testing.T) {
	body := []byte(`{"model":"m","max_tokens":5000,"messages":[{"role":"user","content":"hello"}]}`)
	var rb requestBody
	if err := rb.scan(body, "/chat/completions"); err != nil {
		t.Fatal(err)
	}
	first := rb.splice("a-much-longer-upstream-model", nil)
	if got, _ := io.ReadAll(first); !bytes.Contains(got, []byte(`"a-much-longer-upstream-model"`)) {
		t.Fatalf("first attempt sends %s", got)
	}
	late := &gatedBody{g: first.g} // what GetBody would hand a retrying transport
	buf := &rb.buf[0]
	second := rb.splice("b", nil)
	if got, _ := io.ReadAll(second); string(got) != `{"model":"b","max_tokens":5000,"messages":[{"role":"user","content":"hello"}]}` {
		t.Fatalf("second attempt sends %s", got)
	}
	if &rb.buf[0] != buf {
		t.Error("the second attempt allocated a new buffer")
	}
	if _, err := late.Read(make([]byte, 8)); !errors.Is(err, errBodyRetired) {
		t.Fatalf("a reader of the first attempt read after the second began: %v", err)
	}
	if unchanged := rb.splice("", nil); unchanged.size() != int64(len(body)) {
		t.Fatal("a splice without edits changed the body")
	}
}
