package readiness

import (
	"context"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/store"
)

// TestScenario28_StatusClassCarriesNoUpstreamText walks one upstream provider
// through every reason class. Reason keeps the upstream's own text for logs
// and the admin view; Class, which data-path clients are shown, is one of
// the fixed values and never repeats it.
func TestScenario28_StatusClassCarriesNoUpstreamText(t *testing.T) {
	// What an upstream's error body may hold and no client may see.
	const leak = "postgres://rolter:hunter2@10.0.0.7:5432/meta via resolver 10.0.0.53"
	errBody := `{"message":"` + leak + `"}`

	eng := newEngine(t)
	eng.set("/health", 200, "")
	eng.set("/v1/models", 200, vllmModels(vllmCard("m", 8192)))
	c, _ := newTestCache(t, Config{FailAfter: 1, RecoverAfter: 2})
	c.Sync([]Provider{{ID: 1, Kind: store.KindVLLM, BaseURL: eng.url() + "/v1", Upstream: true}})

	check := func(step string, wantClass ReasonClass, wantReason string) {
		t.Helper()
		st := mustStatus(t, c, 1)
		if st.Class != wantClass {
			t.Fatalf("%s: Class = %q, want %q (status %+v)", step, st.Class, wantClass, st)
		}
		if !strings.Contains(st.Reason, wantReason) {
			t.Fatalf("%s: Reason = %q, want it to contain %q", step, st.Reason, wantReason)
		}
		if strings.Contains(string(st.Class), "hunter2") || strings.Contains(string(st.Class), "10.0.0") {
			t.Fatalf("%s: Class %q repeats upstream text", step, st.Class)
		}
		if (st.Class == "") != st.Ready {
			t.Fatalf("%s: Ready=%v with Class %q; Class must be empty exactly when ready", step, st.Ready, st.Class)
		}
	}
	probe := func() { c.ProbeAll(context.Background()) }

	check("before any probe", ClassNotProbed, ReasonNoProbe)

	eng.set("/health", 503, errBody)
	probe()
	check("/health 503", ClassHealthFailed, leak) // the admin view still gets the detail

	eng.set("/health", 200, "")
	probe()
	check("first success", "", "") // never ready before: ready at once

	eng.set("/v1/models", 200, vllmModels(vllmCard("a", 8192), vllmCard("b", 8192)))
	probe()
	check("two models", ClassMetadataUnusable, "2 models")

	eng.set("/v1/models", 500, errBody)
	probe()
	check("/models 500", ClassMetadataUnusable, leak)

	eng.set("/v1/models", 200, vllmModels(vllmCard("m", 8192)))
	probe()
	check("1 of 2 successes", ClassRecovering, "recovering: 1 of 2")

	probe()
	check("2 of 2 successes", "", "")

	// A hosted API's health probe is GET /models: its failure is a failed
	// health check, not unusable metadata.
	eng.set("/v1/models", 401, errBody)
	c.Sync([]Provider{{ID: 1, Kind: store.KindOpenAI, BaseURL: eng.url() + "/v1", Upstream: true}})
	probe()
	check("hosted /models 401", ClassHealthFailed, leak)
}
