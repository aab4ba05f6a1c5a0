package gateway

import (
	"net/http"
	"testing"

	"github.com/rolter/rolter/internal/h1client"
	"github.com/rolter/rolter/internal/snapshot"
)

// TestUpstreamClientChoice: Config.UpstreamClient (rolter serve
// --upstream-client) picks the transport; h1client by default.
func TestUpstreamClientChoice(t *testing.T) {
	for _, c := range []struct {
		choice string
		std    bool
	}{{"", false}, {UpstreamH1, false}, {UpstreamStd, true}} {
		g := New(Config{UpstreamClient: c.choice}, snapshot.NewHolder(nil, nil), Options{})
		_, isStd := g.transport.(*http.Transport)
		_, isH1 := g.transport.(*h1client.Client)
		if isStd != c.std || isH1 == c.std {
			t.Errorf("UpstreamClient %q: transport %T", c.choice, g.transport)
		}
	}
}
