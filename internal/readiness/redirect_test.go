package readiness

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// TestScenario27_MetadataProbeDoesNotFollowRedirects: a provider whose probe
// endpoints answer a redirect to another server (another port: Go's client
// keeps Authorization across ports of one host) fails its probe, and the
// other server never gets a request, so never sees the provider's key. It
// holds whatever client the cache is handed, including one whose
// CheckRedirect would follow.
func TestScenario27_MetadataProbeDoesNotFollowRedirects(t *testing.T) {
	key := secretKey.Reveal()

	// elsewhere is where the redirects point; it records every request.
	var mu sync.Mutex
	var got []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" Authorization="+r.Header.Get("Authorization")+" x-api-key="+r.Header.Get("x-api-key"))
		mu.Unlock()
		_, _ = w.Write([]byte(vllmModels(vllmCard("m", 8192))))
	}))
	t.Cleanup(elsewhere.Close)

	clients := map[string]func(*http.Transport) *http.Client{
		"plain client": func(tr *http.Transport) *http.Client { return &http.Client{Transport: tr} },
		"client that follows": func(tr *http.Transport) *http.Client {
			return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}
		},
	}
	for _, tc := range []struct {
		name      string
		kind      string
		upstream  bool
		redirect  []string // paths answering a redirect; others answer 200
		wantClass ReasonClass
	}{
		{"vllm /health", store.KindVLLM, false, []string{"/health"}, ClassHealthFailed},
		{"vllm upstream /v1/models", store.KindVLLM, true, []string{"/v1/models"}, ClassMetadataUnusable},
		{"llamacpp upstream /props", store.KindLlamaCpp, true, []string{"/props"}, ClassMetadataUnusable},
		{"openai /v1/models", store.KindOpenAI, false, []string{"/v1/models"}, ClassHealthFailed},
		{"anthropic /v1/models", store.KindAnthropic, false, []string{"/v1/models"}, ClassHealthFailed},
	} {
		for _, cname := range []string{"plain client", "client that follows", "h1client (Config.Dial)"} {
			mk := clients[cname]
			for _, code := range []int{http.StatusFound, http.StatusTemporaryRedirect} {
				t.Run(tc.name+"/"+cname+"/"+http.StatusText(code), func(t *testing.T) {
					redirected := map[string]bool{}
					for _, p := range tc.redirect {
						redirected[p] = true
					}
					provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
						if redirected[r.URL.Path] {
							http.Redirect(w, r, elsewhere.URL+r.URL.Path, code)
							return
						}
						switch r.URL.Path {
						case "/health":
						case "/v1/models":
							if tc.kind == store.KindLlamaCpp {
								_, _ = w.Write([]byte(llamaModels("m", 8192, 8192)))
							} else {
								_, _ = w.Write([]byte(vllmModels(vllmCard("m", 8192))))
							}
						case "/props":
							_, _ = w.Write([]byte(llamaPropsBody("m", 8192, 1, false, false, "b1")))
						default:
							http.NotFound(w, r)
						}
					}))
					t.Cleanup(provider.Close)

					tr := &http.Transport{}
					t.Cleanup(tr.CloseIdleConnections)
					cfg := Config{FailAfter: 1}
					if mk == nil { // the cache's own transport
						mk = clients["client that follows"]
						cfg.Interval, cfg.Dial = time.Minute, (&net.Dialer{}).DialContext
					}
					client := mk(tr)
					followed := client.CheckRedirect
					c := New(cfg, nil, client, nil)
					t.Cleanup(c.closeIdle)
					if (client.CheckRedirect == nil) != (followed == nil) {
						t.Fatal("New changed the caller's client")
					}
					c.Sync([]Provider{{ID: 1, Kind: tc.kind, BaseURL: provider.URL + "/v1", Credential: secretKey, Upstream: tc.upstream}})
					c.ProbeAll(context.Background())

					st := mustStatus(t, c, 1)
					if st.Ready || st.Class != tc.wantClass || !strings.Contains(st.Reason, "returned "+strconv.Itoa(code)) {
						t.Fatalf("status %+v, want not ready, class %q, reason naming the %d", st, tc.wantClass, code)
					}
					if strings.Contains(st.Reason, key) || strings.Contains(st.LastError, key) {
						t.Fatalf("the key leaked into the status: %+v", st)
					}
					mu.Lock()
					defer mu.Unlock()
					if len(got) != 0 {
						t.Fatalf("the redirect target got %d requests: %q", len(got), got)
					}
				})
			}
		}
	}
}
