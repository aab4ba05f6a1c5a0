package fleetapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestParseReport(t *testing.T) {
	good := `{"applied":[{"host_id":1,"revision":"3f0c9a1e5b7d2c44"},{"host_id":2,"revision":"","error":"model needs 80 GB VRAM\n(retrying)"}],
		"discovered":{"gpu":"2x NVIDIA H100 80GB HBM3","gpu_count":2,"vram_gb":158.4,"disk_free_gb":310.2,"vllm_version":"0.11.1rc2.dev12+g1a2b3c.cu128"}}`
	r, fe := ParseReport([]byte(good))
	if fe != nil || len(r.Applied) != 2 || r.Discovered.GPUCount != 2 || r.Applied[1].Error == "" {
		t.Fatalf("good report: %+v %v", r, fe)
	}
	for _, ok := range []string{`{}`, `{"applied":null,"discovered":null}`, `{"applied":[]}`, " {\"applied\":[]}\n"} {
		if _, fe := ParseReport([]byte(ok)); fe != nil {
			t.Errorf("%s refused: %v", ok, fe)
		}
	}
	entry := func(id int) string { return `{"host_id":` + itoa(id) + `,"revision":"r"}` }
	many := func(n int, id func(int) int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = entry(id(i))
		}
		return `{"applied":[` + strings.Join(parts, ",") + `]}`
	}
	bad := []struct{ body, field string }{
		{``, ""},
		{`null`, ""},
		{`[]`, ""},
		{`{"applied":[]} {}`, ""},
		{`{"applied":[]}x`, ""},
		{`{"applied":{}}`, "applied"},
		{many(3000, func(int) int { return 1 }), "applied"},
		{many(MaxReportEntries+1, func(i int) int { return i + 1 }), "applied"},
		{`{"applied":[` + entry(1) + `,` + entry(2) + `,` + entry(1) + `]}`, "applied[2].host_id"},
		{`{"applied":[{"host_id":0}]}`, "applied[0].host_id"},
		{`{"applied":[{"host_id":-3}]}`, "applied[0].host_id"},
		{`{"applied":[{"host_id":"1"}]}`, "applied[0].host_id"},
		{`{"applied":[{"host_id":1.5}]}`, "applied[0].host_id"},
		{`{"applied":[{"host_id":1e30}]}`, "applied[0].host_id"},
		{`{"applied":[3]}`, "applied[0]"},
		{`{"applied":[{"host_id":1,"extra":true}]}`, "applied[0].extra"},
		{`{"applied":[{"HOST_ID":1}]}`, "applied[0].HOST_ID"},
		{`{"applied":[{"host_id":1,"revision":"<b>"}]}`, "applied[0].revision"},
		{`{"applied":[{"host_id":1,"revision":"` + strings.Repeat("a", MaxRevisionLen+1) + `"}]}`, "applied[0].revision"},
		{`{"applied":[{"host_id":1,"error":"` + strings.Repeat("x", MaxErrorLen+1) + `"}]}`, "applied[0].error"},
		{`{"applied":[{"host_id":1,"error":"bell\u0007"}]}`, "applied[0].error"},
		{`{"applied":[{"host_id":1,"download":{"state":"downloading","bytes_done":1,"extra":2}}]}`, "applied[0].download.extra"},
		{`{"applied":[{"host_id":1,"download":[]}]}`, "applied[0].download"},
		{`{"applied":[{"host_id":1,"download":{"state":"done"}}]}`, "applied[0].download.state"},
		{`{"applied":[{"host_id":1,"download":{"state":"downloading","bytes_done":-1}}]}`, "applied[0].download.bytes_done"},
		{`{"applied":[{"host_id":1,"download":{"state":"downloading","bytes_total":1e18}}]}`, "applied[0].download.bytes_total"},
		{`{"applied":[{"host_id":1,"download":{"state":"downloading","bytes_done":"5"}}]}`, "applied[0].download.bytes_done"},
		{`{"bogus":1}`, "bogus"},
		{`{"discovered":{"gpu_cuont":1}}`, "discovered.gpu_cuont"},
		{`{"discovered":[]}`, "discovered"},
		{`{"discovered":{"gpu_count":-5}}`, "discovered.gpu_count"},
		{`{"discovered":{"gpu_count":65}}`, "discovered.gpu_count"},
		{`{"discovered":{"gpu_count":"2"}}`, "discovered.gpu_count"},
		{`{"discovered":{"vram_gb":-1}}`, "discovered.vram_gb"},
		{`{"discovered":{"vram_gb":1e12}}`, "discovered.vram_gb"},
		{`{"discovered":{"disk_free_gb":-0.5}}`, "discovered.disk_free_gb"},
		{`{"discovered":{"disk_free_gb":1e300}}`, "discovered.disk_free_gb"},
		{`{"discovered":{"gpu":"<script>alert(1)</script>"}}`, "discovered.gpu"},
		{`{"discovered":{"gpu":"H100\nforged log line"}}`, "discovered.gpu"},
		{`{"discovered":{"gpu":"` + strings.Repeat("G", MaxNameLen+1) + `"}}`, "discovered.gpu"},
		{`{"discovered":{"vllm_version":"0.11 <img src=x>"}}`, "discovered.vllm_version"},
		{`{"discovered":{"vllm_version":"0.11\u202e"}}`, "discovered.vllm_version"},
	}
	for _, c := range bad {
		r, fe := ParseReport([]byte(c.body))
		if _, ok := fe[c.field]; !ok {
			t.Errorf("%.80s: want field %q named, got %v", c.body, c.field, fe)
		}
		if !reflect.DeepEqual(r, Report{}) {
			t.Errorf("%.80s: a refused report came back with content", c.body)
		}
		for f, msg := range fe {
			if strings.Contains(msg, "script") || strings.Contains(msg, "xxxx") || strings.Contains(msg, "forged") {
				t.Errorf("%s: the message quotes the value: %q", f, msg)
			}
		}
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// A download's progress travels in applied[].download; an entry without
// one (an older agent's) parses as before.
func TestParseReportDownload(t *testing.T) {
	body := `{"applied":[{"host_id":1,"revision":"","error":"downloading","download":{"state":"downloading","bytes_done":1048576,"bytes_total":4194304}},
		{"host_id":2,"revision":"r","download":null}]}`
	r, fe := ParseReport([]byte(body))
	if fe != nil {
		t.Fatalf("refused: %v", fe)
	}
	want := &Download{State: DownloadFetching, BytesDone: 1 << 20, BytesTotal: 4 << 20}
	if !reflect.DeepEqual(r.Applied[0].Download, want) || r.Applied[1].Download != nil {
		t.Errorf("downloads: %+v, %+v", r.Applied[0].Download, r.Applied[1].Download)
	}
	b, _ := json.Marshal(Applied{HostID: 3})
	if strings.Contains(string(b), "download") {
		t.Errorf("an entry without a download marshals %s", b)
	}
}

// TestClip: whatever the box measured, a clipped report passes the
// gateway's checks and keeps what was within bounds.
func TestClip(t *testing.T) {
	r := Report{
		Applied: []Applied{
			{HostID: 1, Revision: "abc", Error: strings.Repeat("é", MaxErrorLen) + "\x00\x1b[31m"},
			{HostID: 1, Revision: "abc"},
			{HostID: 2, Error: "fine\n\tindented", Download: &Download{State: DownloadFetching, BytesDone: -4, BytesTotal: 1 << 62}},
			{HostID: 3, Download: &Download{State: "bogus"}},
		},
		Discovered: Discovered{GPU: "1x <NVIDIA> \"L4\"\x7f", GPUCount: 100, VRAMGB: -1, DiskFreeGB: 1e30, VLLMVersion: "0.11\xff"},
	}
	r.Clip()
	if fe := r.Validate(); fe != nil {
		t.Fatalf("a clipped report is refused: %v", fe)
	}
	if d := r.Applied[1].Download; d == nil || d.BytesDone != 0 || d.BytesTotal != MaxDownloadBytes || r.Applied[2].Download != nil {
		t.Errorf("clipped downloads: %+v, %+v", r.Applied[1].Download, r.Applied[2].Download)
	}
	if len(r.Applied) != 3 || r.Applied[1].Error != "fine\n\tindented" || r.Discovered.GPUCount != MaxGPUCount ||
		r.Discovered.VRAMGB != 0 || r.Discovered.DiskFreeGB != MaxDiskFreeGB || !strings.HasPrefix(r.Discovered.GPU, "1x  NVIDIA") {
		t.Fatalf("clipped: %+v", r)
	}
	b, _ := json.Marshal(r)
	back, fe := ParseReport(b)
	if fe != nil || !reflect.DeepEqual(back, r) {
		t.Fatalf("round trip: %v\n%+v\n%+v", fe, back, r)
	}
}

// FuzzClip: Clip makes any report of a box valid (host ids and revisions
// come from the gateway and are kept valid here), and ParseReport never
// panics and accepts what Validate accepts.
func FuzzClip(f *testing.F) {
	f.Add("model needs 80 GB", "2x NVIDIA H100", "0.11.0", 2, 160.0, 300.0)
	f.Add("\x00\xff<>", "<script>", "\u202e", -5, -1.0, 1e300)
	f.Fuzz(func(t *testing.T, errText, gpu, version string, count int, vram, disk float64) {
		r := Report{Applied: []Applied{{HostID: 1, Revision: "r", Error: errText}, {HostID: 1}},
			Discovered: Discovered{GPU: gpu, GPUCount: count, VRAMGB: vram, DiskFreeGB: disk, VLLMVersion: version}}
		r.Clip()
		if fe := r.Validate(); fe != nil {
			t.Fatalf("clipped report refused: %v", fe)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, fe := ParseReport(b); fe != nil {
			t.Fatalf("parse of a valid report: %v", fe)
		}
	})
}
