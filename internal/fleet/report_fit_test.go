package fleet

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/store/storetest"
)

// The issue-18 report fields: fit, gpus and kv_cache are checked like the
// rest (a bad one refuses the whole report) and stored with the host.
func TestFleetReportFitAndKVCache(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		f := newFleetFixture(t, d, HandlerConfig{})
		id := strconv.FormatInt(f.h1.ID, 10)
		entry := func(extra string) string {
			return `{"applied":[{"host_id":` + id + `,"revision":"r1"` + extra + `}]}`
		}
		for _, c := range []struct{ name, body, field string }{
			{"bad fit", entry(`,"fit":"maybe"`), "applied[0].fit"},
			{"gpu index", entry(`,"gpus":[0,64]`), "applied[0].gpus"},
			{"gpus not ints", entry(`,"gpus":["0"]`), "applied[0].gpus"},
			{"kv state", entry(`,"kv_cache":{"state":"done"}`), "applied[0].kv_cache.state"},
			{"kv unknown field", entry(`,"kv_cache":{"state":"calibrated","owned":1}`), "applied[0].kv_cache.owned"},
			{"kv bytes", entry(`,"kv_cache":{"state":"calibrated","bytes":-1}`), "applied[0].kv_cache.bytes"},
			{"kv huge", entry(`,"kv_cache":{"state":"calibrated","initial_bytes":1125899906842625}`), "applied[0].kv_cache.initial_bytes"},
		} {
			code, body, _ := f.do(t, "POST", fleetapi.ReportPath, f.key, c.body)
			var e struct {
				Error struct {
					Code   string            `json:"code"`
					Fields map[string]string `json:"fields"`
				} `json:"error"`
			}
			_ = json.Unmarshal([]byte(body), &e)
			if _, named := e.Error.Fields[c.field]; code != 400 || e.Error.Code != "invalid_report" || !named {
				t.Errorf("%s: %d %.300s (want 400 invalid_report naming %q)", c.name, code, body, c.field)
			}
		}
		if n := f.st.calls.Load(); n != 0 {
			t.Fatalf("refused reports reached the store: %d writes", n)
		}

		good := `{"applied":[{"host_id":` + id + `,"revision":"` + Revision(f.h1) + `","fit":"checked","gpus":[0,1],` +
			`"kv_cache":{"state":"calibrated","initial_bytes":2147483648,"bytes":2358995846}},` +
			`{"host_id":` + strconv.FormatInt(f.h2.ID, 10) + `,"revision":"","fit":"unchecked"}]}`
		if code, body, _ := f.do(t, "POST", fleetapi.ReportPath, f.key, good); code != 200 {
			t.Fatalf("good report: %d %s", code, body)
		}
		x1, x2 := f.host(t, f.h1.ID), f.host(t, f.h2.ID)
		kv := x1.Report.KVCache
		if x1.Report.Fit != fleetapi.FitChecked || !slices.Equal(x1.Report.GPUs, []int{0, 1}) ||
			kv == nil || kv.State != fleetapi.KVCalibrated || kv.InitialBytes != 2147483648 || kv.Bytes != 2358995846 {
			t.Errorf("host 1 report %+v", x1.Report)
		}
		if x2.Report.Fit != fleetapi.FitUnchecked || x2.Report.KVCache != nil {
			t.Errorf("host 2 report %+v", x2.Report)
		}
	})
}
