package fleet

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
	"github.com/rolter/rolter/internal/store/storetest"
)

// countingStore is a real store that counts report writes.
type countingStore struct {
	store.Store
	calls, rows atomic.Int64
}

func (c *countingStore) RecordHostReports(ctx context.Context, entries []store.HostReportEntry, at time.Time) error {
	c.calls.Add(1)
	c.rows.Add(int64(len(entries)))
	return c.Store.RecordHostReports(ctx, entries, at)
}

// fleetFixture is an org with a fleet key, two hosts at 127.0.0.1 and one
// elsewhere, behind a real handler.
type fleetFixture struct {
	st         *countingStore
	srv        *httptest.Server
	key        string
	org        int64
	h1, h2, h3 *store.Host
}

func newFleetFixture(t *testing.T, dialect string, cfg HandlerConfig) *fleetFixture {
	t.Helper()
	ctx := context.Background()
	st := &countingStore{Store: storetest.Open(t, dialect, nil)}
	org := &store.Org{Name: "default"}
	must(t, st.CreateOrg(ctx, org))
	pj := &store.Project{OrgID: org.ID, Name: "default"}
	must(t, st.CreateProject(ctx, pj))
	tok, lookup := secret.Mint(secret.PrefixFleetKey)
	must(t, st.CreateFleetKey(ctx, &store.FleetKey{OrgID: org.ID, Name: "k", Lookup: lookup, Hash: secret.HashOf(tok.Reveal())}, 2))
	f := &fleetFixture{st: st, key: tok.Reveal(), org: org.ID}
	for i, h := range []**store.Host{&f.h1, &f.h2, &f.h3} {
		ip := "127.0.0.1"
		if i == 2 {
			ip = "10.0.0.9"
		}
		*h = &store.Host{OrgID: org.ID, ProjectID: pj.ID, IP: ip, Port: 8000 + i, ModelName: "qwen3",
			APIKey: secret.New("rh-k_" + strconv.Itoa(i)), Recipe: fleetapi.Recipe{VLLM: vllm()}}
		must(t, st.CreateHost(ctx, *h, nil))
	}
	f.srv = httptest.NewServer(NewHandler(st, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fleetFixture) do(t *testing.T, method, path, key, body string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	must(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := f.srv.Client().Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func (f *fleetFixture) host(t *testing.T, id int64) *store.Host {
	t.Helper()
	h, err := f.st.GetHost(context.Background(), f.org, id)
	must(t, err)
	return h
}

// TestScenario32_FleetReport: a report is checked whole before anything
// is written: 3,000 duplicate entries, a repeated host, gpu_count -5,
// HTML in a GPU name, an unknown field or an oversized value get 400
// invalid_report naming the field, and no write reaches the store. A good
// report is written in one store call, for the box's own hosts only.
func TestScenario32_FleetReport(t *testing.T) {
	storetest.Each(t, func(t *testing.T, d string) {
		f := newFleetFixture(t, d, HandlerConfig{})
		applied := func(ids ...int64) string {
			parts := make([]string, len(ids))
			for i, id := range ids {
				parts[i] = `{"host_id":` + strconv.FormatInt(id, 10) + `,"revision":"r1","error":"launch failed"}`
			}
			return `"applied":[` + strings.Join(parts, ",") + `]`
		}
		dup := make([]int64, 3000)
		for i := range dup {
			dup[i] = f.h1.ID
		}
		for _, c := range []struct{ name, body, field string }{
			{"3000 duplicates", `{` + applied(dup...) + `}`, "applied"},
			{"one repeat", `{` + applied(f.h1.ID, f.h2.ID, f.h1.ID) + `}`, "applied[2].host_id"},
			{"negative gpu_count", `{` + applied(f.h1.ID) + `,"discovered":{"gpu_count":-5}}`, "discovered.gpu_count"},
			{"html", `{` + applied(f.h1.ID) + `,"discovered":{"gpu":"<img src=x onerror=alert(1)>","gpu_count":1}}`, "discovered.gpu"},
			{"unknown field", `{` + applied(f.h1.ID) + `,"discovered":{"gpu_count":1,"owned":true}}`, "discovered.owned"},
			{"unknown top field", `{` + applied(f.h1.ID) + `,"state":"serving"}`, "state"},
			{"oversized error", `{"applied":[{"host_id":` + strconv.FormatInt(f.h1.ID, 10) + `,"error":"` + strings.Repeat("e", 4096) + `"}]}`, "applied[0].error"},
			{"unknown download field", `{"applied":[{"host_id":` + strconv.FormatInt(f.h1.ID, 10) + `,"download":{"state":"downloading","eta":3}}]}`, "applied[0].download.eta"},
			{"huge vram", `{` + applied(f.h1.ID) + `,"discovered":{"vram_gb":1e15}}`, "discovered.vram_gb"},
			{"not json", `applied=1`, ""},
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
		for _, h := range []*store.Host{f.h1, f.h2} {
			if x := f.host(t, h.ID); x.ReportedAt != nil || x.AppliedRevision != "" {
				t.Fatalf("host %d changed by a refused report: %+v", h.ID, x)
			}
		}

		// A good report: the box's two hosts in one write; the host at
		// another address is ignored, as before.
		cur := Revision(f.h1)
		good := `{"applied":[{"host_id":` + strconv.FormatInt(f.h1.ID, 10) + `,"revision":"` + cur + `"},` +
			`{"host_id":` + strconv.FormatInt(f.h2.ID, 10) + `,"revision":"","error":"model needs 80 GB VRAM","download":{"state":"downloading","bytes_done":512,"bytes_total":2048}},` +
			`{"host_id":` + strconv.FormatInt(f.h3.ID, 10) + `,"revision":"x"}],` +
			`"discovered":{"gpu":"1x NVIDIA L4","gpu_count":1,"vram_gb":22.5,"disk_free_gb":300,"vllm_version":"0.11.0"}}`
		code, body, _ := f.do(t, "POST", fleetapi.ReportPath, f.key, good)
		if code != 200 || !strings.Contains(body, `"accepted":2`) {
			t.Fatalf("good report: %d %s", code, body)
		}
		if calls, rows := f.st.calls.Load(), f.st.rows.Load(); calls != 1 || rows != 2 {
			t.Fatalf("good report: %d store writes of %d rows, want 1 of 2", calls, rows)
		}
		x1, x2, x3 := f.host(t, f.h1.ID), f.host(t, f.h2.ID), f.host(t, f.h3.ID)
		if x1.AppliedRevision != cur || x1.Applied == nil || x1.Report.Discovered.GPU != "1x NVIDIA L4" {
			t.Errorf("host 1 after report: %+v", x1)
		}
		if d := x2.Report.Download; d == nil || d.BytesDone != 512 || d.BytesTotal != 2048 || x1.Report.Download != nil {
			t.Errorf("download progress after report: %+v, %+v", x2.Report.Download, x1.Report.Download)
		}
		if x2.ReportedAt == nil || x2.Report.Error != "model needs 80 GB VRAM" || x2.Applied != nil {
			t.Errorf("host 2 after report: %+v", x2)
		}
		if x3.ReportedAt != nil {
			t.Errorf("a host at another address was written: %+v", x3)
		}
	})
}
