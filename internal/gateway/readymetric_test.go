package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rolter/rolter/internal/store"
)

// TestProviderReadyMetric: rolter_provider_ready is 1 for a provider whose
// probes pass and 0 for one whose endpoint refuses connections, as the
// real readiness cache decides.
func TestProviderReadyMetric(t *testing.T) {
	h := newProbedHarness(t, Config{})
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) { _, _ = io.WriteString(w, `{}`) })
	dead := httptest.NewServer(http.NotFoundHandler())
	deadBase := dead.URL + "/v1"
	dead.Close() // connection refused
	h.provider("up", up.base(), store.ProviderSettings{})
	h.provider("gone", deadBase, store.ProviderSettings{})
	h.probe()
	want := fmt.Sprintf(`
# HELP rolter_provider_ready 1 while the provider is ready (its active health and metadata probes pass), else 0.
# TYPE rolter_provider_ready gauge
rolter_provider_ready{org=%[1]q,provider="gone"} 0
rolter_provider_ready{org=%[1]q,provider="up"} 1
`, h.org.Name)
	if err := testutil.GatherAndCompare(h.reg, strings.NewReader(want), "rolter_provider_ready"); err != nil {
		t.Fatal(err)
	}
}
