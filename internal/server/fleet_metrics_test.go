package server_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/testkit"
)

// TestFleetMetricsThroughAnApply: a box whose /v1/models reports another
// max_model_len than its recipe's flag is routed and reported skewed, in
// the host view and on /metrics; the fleet series follow the host through
// pending → serving → draining → serving, and the drain is timed.
func TestFleetMetricsThroughAnApply(t *testing.T) {
	f := startDrainFleet(t, "sqlite")
	box := newDrainBox(t, false)
	box.maxLen.Store(16384) // the recipe says --max-model-len 32768
	code, body := f.r.call(t, "POST", "/admin/v1/orgs/default/hosts", f.tok, fmt.Sprintf(
		`{"ip":"127.0.0.1","port":%d,"model_name":"qwen3","drain_timeout":"30s","recipe":`+recipeJSON+`}`, box.port(t), ""))
	if code != 201 {
		t.Fatalf("create host: %d %s", code, body)
	}
	h := decodeJSON[hostJSON](t, body)
	id := strconv.FormatInt(h.ID, 10)
	series := func(name, labels string) string { return name + "{" + labels + "}" }
	hosts := func(state string) string { return series("rolter_fleet_hosts", `org="default",state="`+state+`"`) }
	skew := func(kind string) string {
		return series("rolter_fleet_host_skew", `host="`+id+`",kind="`+kind+`",org="default"`)
	}
	waitMetrics := func(what string, want map[string]float64) {
		t.Helper()
		var got string
		testkit.Eventually(t, what, func() bool {
			_, got = f.r.call(t, "GET", "/metrics", "", "")
			for s, v := range want {
				if n, ok := seriesValue(got, s); !ok || n != v {
					return false
				}
			}
			return true
		})
	}

	waitMetrics("a pending host", map[string]float64{hosts("pending"): 1, hosts("serving"): 0, hosts("draining"): 0})
	box.key.Store(h.APIKey) // the box boots
	box.healthy.Store(true)
	f.r.waitState(t, f.tok, h.ID, "serving")
	f.report(t, h.ID, h.Revision)
	f.assignment(t, h.ID) // a fetch: the liveness age starts
	waitMetrics("a serving host, skewed on max_model_len", map[string]float64{hosts("pending"): 0, hosts("serving"): 1,
		skew("args"): 1, skew("revision"): 0,
		series("rolter_provider_ready", `org="default",provider="host-`+id+`"`): 1})
	// The fetch shows at the controller's next listing (within a drain
	// check's second).
	testkit.Eventually(t, "a liveness age", func() bool {
		_, metrics := f.r.call(t, "GET", "/metrics", "", "")
		_, ok := seriesValue(metrics, series("rolter_fleet_host_liveness_age_seconds", `host="`+id+`",org="default"`))
		return ok
	})
	_, body = f.r.call(t, "GET", "/admin/v1/orgs/default/hosts/"+id, f.tok, "")
	view := decodeJSON[struct {
		State      string `json:"state"`
		ServedSkew []struct {
			Field, Recipe, Served, Reason string
			Fatal                         bool
		} `json:"served_skew"`
	}](t, body)
	if view.State != "serving" || len(view.ServedSkew) != 1 || view.ServedSkew[0].Field != "max_model_len" ||
		view.ServedSkew[0].Recipe != "32768" || view.ServedSkew[0].Served != "16384" || view.ServedSkew[0].Fatal ||
		!strings.Contains(view.ServedSkew[0].Reason, "16384") {
		t.Fatalf("host view: %s", body)
	}

	f.newRevision(t, h.ID)
	waitMetrics("a revision skew", map[string]float64{skew("revision"): 1})
	if code, body := f.r.call(t, "POST", "/admin/v1/orgs/default/hosts/"+id+"/apply", f.tok, ""); code != 200 {
		t.Fatalf("apply: %d %s", code, body)
	}
	waitMetrics("a draining host", map[string]float64{hosts("draining"): 1, hosts("serving"): 0})
	f.restartWhenAllowed(t, box, h.ID)
	f.r.waitState(t, f.tok, h.ID, "serving")
	waitMetrics("the host serving its new revision, the drain timed", map[string]float64{
		hosts("serving"): 1, hosts("draining"): 0, skew("revision"): 0, skew("args"): 1,
		series("rolter_fleet_drain_duration_seconds_count", `org="default",outcome="idle"`): 1,
		series("rolter_fleet_restart_out_of_routing_seconds_count", `org="default"`):        1,
	})
}

// seriesValue finds one series (name{labels} as the text format writes it) in
// a /metrics body.
func seriesValue(body, series string) (float64, bool) {
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			return n, err == nil
		}
	}
	return 0, false
}
