package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/server"
	"github.com/rolter/rolter/internal/store/storetest"
)

// The web UI is mounted at /ui/ and its address printed under the
// first-start banner that shows the admin token to log in with.
func TestWebUIIsMountedAndAnnounced(t *testing.T) {
	spec, dir := storetest.Spec(t, "sqlite")
	r := start(t, server.Config{Store: spec, DataDir: dir})
	t.Cleanup(func() { _ = r.srv.Shutdown() })
	out := r.out.String()
	if !strings.Contains(out, "admin token:") || !strings.Contains(out, "web UI:       http://"+r.addr+"/ui/") {
		t.Fatalf("start-up output: %q", out)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get("http://" + r.addr + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("/ui: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, err = client.Get("http://" + r.addr + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("/ui/login: %d %v", resp.StatusCode, resp.Header)
	}
}
