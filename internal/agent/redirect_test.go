package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/testkit"
)

// sink is the server a redirect points to; it records what reached it.
type sink struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits []string // method, path and Authorization of each request
}

func newSink(t *testing.T, body string) *sink {
	s := &sink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits = append(s.hits, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
		s.mu.Unlock()
		w.Write([]byte(body))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *sink) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.hits...)
}

// TestScenario27_AgentFetchDoesNotFollowRedirects: a gateway URL that
// answers its config fetch (302) or the report (307, which keeps method
// and body) with a redirect to another port never gets the agent there,
// so the fleet key stays with the gateway; with the agent's own client and
// with a caller's client that would follow.
func TestScenario27_AgentFetchDoesNotFollowRedirects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		report bool // redirect the report only; else the fetch
		client func() *http.Client
	}{
		{"fetch, own client", false, nil},
		{"fetch, caller's client", false, func() *http.Client { return &http.Client{Transport: &http.Transport{}} }},
		{"report, own client", true, nil},
		{"report, caller's client", true, func() *http.Client { return &http.Client{Transport: &http.Transport{}} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			other := newSink(t, `{"ip":"127.0.0.1","assignments":[]}`)
			var redirected atomic.Int32
			gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.URL.Path == fleetapi.ConfigPath && !tc.report:
					redirected.Add(1)
					http.Redirect(w, r, other.srv.URL+r.URL.Path, http.StatusFound)
				case r.URL.Path == fleetapi.ConfigPath:
					w.Write([]byte(`{"ip":"127.0.0.1","assignments":[]}`))
				default:
					redirected.Add(1)
					http.Redirect(w, r, other.srv.URL+r.URL.Path, http.StatusTemporaryRedirect)
				}
			}))
			defer gw.Close()
			cfg := e.config(gw.URL)
			if tc.client != nil {
				cfg.HTTPClient = tc.client()
			}
			r := e.start(cfg)
			testkit.Eventually(t, "two redirects answered", func() bool { return redirected.Load() >= 2 })
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
			if got := other.requests(); len(got) != 0 {
				t.Fatalf("the agent followed the redirect: %q (fleet key leaked: %v)", got,
					strings.Contains(strings.Join(got, " "), testFleetKey))
			}
			if !tc.report && !strings.Contains(e.logs.String(), "redirects are not followed") {
				t.Errorf("the refused redirect is not logged as such:\n%s", e.logs.String())
			}
			if strings.Contains(e.logs.String(), testFleetKey) {
				t.Error("the fleet key is in the log")
			}
		})
	}
	// The caller's client keeps its own policy.
	cl := &http.Client{}
	if _, err := New(Config{Server: "http://127.0.0.1:1", FleetKey: wrongKey, StateDir: t.TempDir(), HTTPClient: cl}); err != nil {
		t.Fatal(err)
	}
	if cl.CheckRedirect != nil {
		t.Error("New changed the caller's client")
	}
}

// TestScenario27_AgentDownloadRedirects: a url-source download may follow
// a mirror's redirect to blob storage (it carries no rolter secret, and
// sends no Authorization there), but not when the URL carries credentials
// (user:password), not from https to http, and not without end.
func TestScenario27_AgentDownloadRedirects(t *testing.T) {
	blob := newSink(t, "weights from the blob store")
	var loops atomic.Int32
	mirror := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/loop" {
			loops.Add(1)
			http.Redirect(w, r, "/loop", http.StatusFound)
			return
		}
		http.Redirect(w, r, blob.srv.URL+"/blob"+r.URL.Path+"?sig=signed", http.StatusFound)
	})
	plain := httptest.NewServer(mirror)
	defer plain.Close()
	tlsMirror := httptest.NewTLSServer(mirror)
	defer tlsMirror.Close()

	download := func(t *testing.T, client *http.Client, rawURL string) (string, error) {
		t.Helper()
		a, err := New(Config{Server: "http://127.0.0.1:1", FleetKey: wrongKey, StateDir: t.TempDir(), HTTPClient: client})
		if err != nil {
			t.Fatal(err)
		}
		defer a.shutdown()
		dir := filepath.Join(t.TempDir(), "w")
		if err := downloadURL(context.Background(), a.download, rawURL, dir, 0, &progress{}); err != nil {
			return "", err
		}
		b, err := os.ReadFile(loadPath(dir))
		return string(b), err
	}

	// Followed: no credential in the download.
	got, err := download(t, nil, plain.URL+"/model.gguf")
	if err != nil || got != "weights from the blob store" {
		t.Fatalf("a mirror's redirect was not followed: %q, %v", got, err)
	}
	if hits := blob.requests(); len(hits) != 1 || hits[0] != "GET /blob/model.gguf auth=" {
		t.Fatalf("blob store saw %q", hits)
	}

	for _, tc := range []struct {
		name, url, why string
		client         *http.Client
	}{
		{"credentials in the URL", strings.Replace(plain.URL, "http://", "http://user:pa55word@", 1) + "/model.gguf", "credentials", nil},
		{"https to http", tlsMirror.URL + "/model.gguf", "https to plain http", tlsMirror.Client()},
		{"credentials, caller's client", strings.Replace(plain.URL, "http://", "http://user:pa55word@", 1) + "/model.gguf", "credentials", &http.Client{}},
		{"loop", plain.URL + "/loop", "redirects", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(blob.requests())
			_, err := download(t, tc.client, tc.url)
			if err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("download = %v, want an error about %s", err, tc.why)
			}
			if strings.Contains(err.Error(), "pa55word") || strings.Contains(err.Error(), "sig=") {
				t.Errorf("the error quotes a credential: %v", err)
			}
			if n := len(blob.requests()); n != before {
				t.Fatalf("the redirect was followed to the blob store (%d requests)", n-before)
			}
		})
	}
	if n := loops.Load(); n > maxDownloadRedirects+1 {
		t.Errorf("a redirect loop was followed %d times", n)
	}
}
