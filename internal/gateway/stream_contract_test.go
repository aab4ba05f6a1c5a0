package gateway

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// claudeStream is an Anthropic Messages stream, as an upstream sends it.
var claudeStream = []string{
	"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n",
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n",
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
}

// streamOf is a whole stream in the upstream's API.
func streamOf(kind string) []string {
	if kind == "anthropic" {
		return claudeStream
	}
	return append(append([]string(nil), vllmStream...), "data: [DONE]\n\n")
}

// upstreamError is an in-stream error event in the upstream's API, with a
// text no client may see.
func upstreamErrorEvent(kind string) string {
	if kind == "anthropic" {
		return "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"SECRET-UPSTREAM-TEXT at 10.1.2.3\"}}\n\n"
	}
	return `data: {"error":{"object":"error","message":"SECRET-UPSTREAM-TEXT at 10.1.2.3","type":"InternalServerError","code":500}}` + "\n\n"
}

func (h *harness) kindProvider(slug, kind, base string, settings store.ProviderSettings) int64 {
	p := &store.Provider{OrgID: h.org.ID, Slug: slug, Name: slug, Kind: kind, BaseURL: base, MetadataSource: "configured",
		Settings: settings, Keys: []store.ProviderKey{{Secret: secret.New("sk-" + slug + "-FAKE"), Weight: 1}}}
	must(h.t, h.db.CreateProvider(context.Background(), p))
	h.reload()
	return p.ID
}

// surface is a client API: its path, a streamed request, and its stream's
// terminator.
type surface struct {
	name, path, body, end string
}

var surfaces = []surface{
	{"chat", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "data: [DONE]"},
	{"messages", "/v1/messages", `{"model":"m","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, `event: message_stopdata: {"type":"message_stop"}`},
}

// TestStreamBreakEndsAlikeOnEverySurface: a stream that breaks after its
// first event ends with the same final event whether the upstream speaks
// the client's API or the other one, for both client APIs: the gateway's
// stable code and fixed message in the client's shape, never the
// upstream's text, and no terminator.
func TestStreamBreakEndsAlikeOnEverySurface(t *testing.T) {
	for _, s := range surfaces {
		same := "vllm"
		if s.name == "messages" {
			same = "anthropic"
		}
		other := map[string]string{"vllm": "anthropic", "anthropic": "vllm"}[same]
		for _, brk := range []string{"reset", "error event"} {
			t.Run(s.name+"/"+brk, func(t *testing.T) {
				last := map[string]string{}
				for _, kind := range []string{same, other} {
					h := newHarness(t, Config{})
					up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
						sseHeader(w)
						sseWrite(w, streamOf(kind)[:3]...)
						if brk == "error event" {
							sseWrite(w, upstreamErrorEvent(kind))
							if kind == "anthropic" && same == "anthropic" {
								// A same-API Messages stream passes the
								// upstream's events through; only a break
								// is the gateway's to end.
								return
							}
						}
						panic(http.ErrAbortHandler)
					})
					pid := h.kindProvider("p", kind, up.base(), store.ProviderSettings{})
					h.route("m", "", store.Target{ProviderID: pid, UpstreamModel: "up-model", Weight: 1})
					resp := h.post(s.path, s.body, "anthropic-version", "2023-06-01")
					events := readEvents(t, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || len(events) < 2 {
						t.Fatalf("%s upstream: status %d, events %q", kind, resp.StatusCode, events)
					}
					all := strings.Join(events, "\n")
					if strings.Contains(all, s.end) {
						t.Fatalf("%s upstream: a broken stream ended with its terminator:\n%s", kind, all)
					}
					if brk == "error event" && kind == same && same == "anthropic" {
						continue // passed through as the upstream sent it
					}
					// A same-API stream passes the upstream's events through
					// as they are; a translated one never carries its text.
					if kind == other && strings.Contains(all, "SECRET-UPSTREAM-TEXT") {
						t.Fatalf("%s upstream: the upstream's text reached the client:\n%s", kind, all)
					}
					last[kind] = events[len(events)-1]
					recs := h.usage.all()
					if len(recs) != 1 || recs[0].Class != string(ClassStreamBroken) || recs[0].Status != 200 {
						t.Fatalf("%s upstream: usage %+v", kind, recs)
					}
				}
				want := `"code":"upstream_stream_error"`
				msg := `"message":"the upstream stream broke before it finished"`
				for kind, ev := range last {
					if !strings.Contains(ev, want) || !strings.Contains(ev, msg) {
						t.Errorf("%s upstream: last event %s", kind, ev)
					}
					if s.name == "messages" && (!strings.HasPrefix(ev, "event: errordata: {") || !strings.Contains(ev, `"type":"error"`)) ||
						s.name == "chat" && !strings.HasPrefix(ev, `data: {"error":{`) {
						t.Errorf("%s upstream: last event not in the %s shape: %s", kind, s.name, ev)
					}
				}
				if len(last) == 2 && last[same] != last[other] {
					t.Errorf("the surfaces end differently:\n same API: %s\n translated: %s", last[same], last[other])
				}
			})
		}
	}
}

// TestTranslatedStreamFailsOverBeforeFirstEvent: a translated stream sends
// nothing before the upstream's first event, so an upstream that fails
// before it fails over to another target, as a same-API stream does.
func TestTranslatedStreamFailsOverBeforeFirstEvent(t *testing.T) {
	for _, s := range surfaces {
		kind := "anthropic" // the other API than the client's
		if s.name == "messages" {
			kind = "vllm"
		}
		for _, fail := range []string{"reset", "empty", "error event", "garbage"} {
			t.Run(s.name+"/"+fail, func(t *testing.T) {
				h := newHarness(t, Config{})
				var n atomic.Int32
				up := newUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
					sseHeader(w)
					if n.Add(1) == 1 {
						switch fail {
						case "reset":
							w.(http.Flusher).Flush()
							panic(http.ErrAbortHandler)
						case "error event":
							sseWrite(w, upstreamErrorEvent(kind))
						case "garbage":
							sseWrite(w, "data: <html>bad gateway</html>\n\n")
						}
						return
					}
					sseWrite(w, streamOf(kind)...)
				})
				a := h.kindProvider("a", kind, up.base(), store.ProviderSettings{})
				b := h.kindProvider("b", kind, up.base(), store.ProviderSettings{})
				h.route("m", "", store.Target{ProviderID: a, UpstreamModel: "up-model", Weight: 1},
					store.Target{ProviderID: b, UpstreamModel: "up-model", Weight: 1})
				resp := h.post(s.path, s.body, "anthropic-version", "2023-06-01")
				events := readEvents(t, resp.Body)
				resp.Body.Close()
				all := strings.Join(events, "\n")
				if resp.StatusCode != 200 || !strings.Contains(all, s.end) || strings.Contains(all, "error") {
					t.Fatalf("status %d, events:\n%s", resp.StatusCode, all)
				}
				if up.count() != 2 {
					t.Fatalf("upstream called %d times, want 2", up.count())
				}
				if recs := h.usage.all(); len(recs) != 1 || recs[0].Attempts != 2 || recs[0].Class != "" {
					t.Fatalf("usage %+v", recs)
				}
				if v := counterValue(t, h.reg, "rolter_upstream_attempts_total", map[string]string{"class": string(ClassServer)}) +
					counterValue(t, h.reg, "rolter_upstream_attempts_total", map[string]string{"class": string(ClassConnect)}); v != 1 {
					t.Fatalf("failed attempts %v, want 1", v)
				}
			})
		}
	}
}

// TestTranslatedStreamTimeouts: a translated stream's timeouts are
// timeouts: no first event within the first-byte timeout fails over as
// "timeout", and silence mid-stream ends it as "idle_timeout" with
// upstream_timeout, exactly as on a same-API stream (not stream_broken).
func TestTranslatedStreamTimeouts(t *testing.T) {
	for _, s := range surfaces {
		kind := "anthropic"
		if s.name == "messages" {
			kind = "vllm"
		}
		t.Run(s.name+"/first byte", func(t *testing.T) {
			h := newHarness(t, Config{})
			var n atomic.Int32
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				sseHeader(w)
				if n.Add(1) == 1 {
					w.(http.Flusher).Flush()
					<-r.Context().Done() // headers, then nothing
					return
				}
				sseWrite(w, streamOf(kind)...)
			})
			set := store.ProviderSettings{FirstByteTimeout: store.Duration(200 * time.Millisecond)}
			a := h.kindProvider("a", kind, up.base(), set)
			b := h.kindProvider("b", kind, up.base(), set)
			h.route("m", "", store.Target{ProviderID: a, UpstreamModel: "up-model", Weight: 1},
				store.Target{ProviderID: b, UpstreamModel: "up-model", Weight: 1})
			resp := h.post(s.path, s.body, "anthropic-version", "2023-06-01")
			all := strings.Join(readEvents(t, resp.Body), "\n")
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(all, s.end) {
				t.Fatalf("status %d, events:\n%s", resp.StatusCode, all)
			}
			if v := counterValue(t, h.reg, "rolter_upstream_attempts_total", map[string]string{"class": string(ClassTimeout)}); v != 1 {
				t.Fatalf("timeout attempts %v, want 1", v)
			}
		})
		t.Run(s.name+"/idle", func(t *testing.T) {
			h := newHarness(t, Config{})
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				sseHeader(w)
				sseWrite(w, streamOf(kind)[:3]...)
				<-r.Context().Done()
			})
			pid := h.kindProvider("p", kind, up.base(), store.ProviderSettings{IdleTimeout: store.Duration(300 * time.Millisecond)})
			h.route("m", "", store.Target{ProviderID: pid, UpstreamModel: "up-model", Weight: 1})
			began := time.Now()
			resp := h.post(s.path, s.body, "anthropic-version", "2023-06-01")
			events := readEvents(t, resp.Body)
			resp.Body.Close()
			t.Logf("ended after %v", time.Since(began))
			last := events[len(events)-1]
			if !strings.Contains(last, `"code":"upstream_timeout"`) || !strings.Contains(last, "no event within the idle timeout") {
				t.Fatalf("last event %s", last)
			}
			if recs := h.usage.all(); len(recs) != 1 || recs[0].Class != string(ClassIdleTimeout) {
				t.Fatalf("usage %+v", recs)
			}
		})
	}
}
