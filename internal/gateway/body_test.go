package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
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
				if got := rb.splice("upstream/model", &clamp); !bytes.Equal(got, want) {
					t.Fatalf("%s ceiling %d %s:\n got %s\nwant %s", ep, ceiling, b, got, want)
				}
			}
		}
	}
}

// TestSpliceReusesBuffer: each attempt's body is built in the same buffer
// once the transport wrote every copy of the previous one; while a copy may
// still be read, the next attempt gets a new buffer and the old bytes stay.
func TestSpliceReusesBuffer(t *testing.T) {
	body := []byte(`{"model":"m","max_tokens":5000,"messages":[{"role":"user","content":"hello"}]}`)
	var rb requestBody
	if err := rb.scan(body, "/chat/completions"); err != nil {
		t.Fatal(err)
	}
	first := rb.splice("a-much-longer-upstream-model", nil)
	_, _, getBody := rb.send(context.Background(), first)
	rb.bufSent.written.Add(1)            // the request's own body written
	if _, err := getBody(); err != nil { // a retry on a new connection: still being written
		t.Fatal(err)
	}
	kept := string(first)
	second := rb.splice("b", nil)
	if string(second) != `{"model":"b","max_tokens":5000,"messages":[{"role":"user","content":"hello"}]}` {
		t.Fatalf("second attempt sends %s", second)
	}
	if string(first) != kept || &first[0] == &second[0] {
		t.Fatal("the second attempt overwrote a body a transport may still read")
	}
	_, _, _ = rb.send(context.Background(), second)
	rb.bufSent.written.Add(1)
	third := rb.splice("c", nil)
	if &third[0] != &second[0] {
		t.Error("the third attempt did not reuse the buffer the second's transport was done with")
	}
	if string(third) != `{"model":"c","max_tokens":5000,"messages":[{"role":"user","content":"hello"}]}` {
		t.Fatalf("third attempt sends %s", third)
	}
	if unchanged := rb.splice("", nil); !bytes.Equal(unchanged, body) || &unchanged[0] != &body[0] {
		t.Fatal("a splice without edits copied or changed the body")
	}
}

// TestSpliceRawAttemptDoesNotFreeTheBuffer: an attempt that sends the
// client's body unedited in between does not make the buffer another
// transport may still read look free.
func TestSpliceRawAttemptDoesNotFreeTheBuffer(t *testing.T) {
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`)
	var rb requestBody
	if err := rb.scan(body, "/chat/completions"); err != nil {
		t.Fatal(err)
	}
	first := rb.splice("upstream-a", nil)
	_, _, _ = rb.send(context.Background(), first) // never written: an upstream answered first
	kept := string(first)
	raw := rb.splice("", nil) // the next target sends the client's model
	if &raw[0] != &body[0] {
		t.Fatal("an unedited attempt did not send the client's body")
	}
	ctx, _, _ := rb.send(context.Background(), raw)
	httptrace.ContextClientTrace(ctx).WroteRequest(httptrace.WroteRequestInfo{}) // the raw body is all written
	third := rb.splice("upstream-c", nil)
	if string(first) != kept || &third[0] == &first[0] {
		t.Fatalf("the third attempt rebuilt a buffer the first attempt's transport may still read: %s", first)
	}
}

// TestFailoverWithLargeBodiesKeepsEachAttemptsBytes: upstreams that answer
// before reading a large body leave their transports still writing it; the
// next attempts' bodies (edited, unedited, edited again) must not rewrite
// bytes a transport is still sending. Under -race this also proves no
// buffer is written while read.
func TestFailoverWithLargeBodiesKeepsEachAttemptsBytes(t *testing.T) {
	h := newHarness(t, Config{MaxAttempts: 3})
	early := func(name string) *upstream {
		return newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			w.WriteHeader(http.StatusServiceUnavailable)
		})
	}
	a, b := early("a"), early("b")
	var got atomic.Value
	c := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		got.Store(string(body))
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"uc","choices":[]}`)
	})
	pa := h.provider("a", a.base(), store.ProviderSettings{})
	pb := h.provider("b", b.base(), store.ProviderSettings{})
	pc := h.provider("c", c.base(), store.ProviderSettings{})
	h.route("m", "", store.Target{ProviderID: pa, UpstreamModel: "upstream-a", Weight: 1000},
		store.Target{ProviderID: pb, Weight: 100}, store.Target{ProviderID: pc, UpstreamModel: "uc", Weight: 1})
	filler := strings.Repeat("x", 1<<20)
	for range 5 {
		resp := h.post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`+filler+`"}]}`)
		readAll(t, resp)
		if resp.StatusCode != 200 {
			continue // the order of targets is random: C may come first or not at all
		}
		body, _ := got.Load().(string)
		if !strings.HasPrefix(body, `{"model":"uc","messages":[{"role":"user","content":"xxx`) || !strings.HasSuffix(body, `xxx"}]}`) ||
			len(body) != len(`{"model":"uc","messages":[{"role":"user","content":""}]}`)+len(filler) {
			t.Fatalf("the upstream that answered got a damaged body (%d bytes): %.80s", len(body), body)
		}
	}
}
