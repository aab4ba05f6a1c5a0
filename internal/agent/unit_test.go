package agent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rolter/rolter/internal/fleetapi"
)

func TestParseSMI(t *testing.T) {
	gpus, err := parseSMI("0, NVIDIA H100 80GB HBM3, 81559, 81000\n1, NVIDIA H100 80GB HBM3, 81559, [N/A]\n\n")
	if err != nil || len(gpus) != 2 || gpus[1].Name != "NVIDIA H100 80GB HBM3" || gpus[1].MemoryMiB != 81559 ||
		gpus[0].FreeMiB != 81000 || gpus[1].FreeMiB != 81559 || gpus[1].Index != 1 {
		t.Fatalf("parseSMI = %+v, %v", gpus, err)
	}
	h := hardware{SMIFound: true, GPUs: gpus}
	if got := h.gpuSummary(); got != "2x NVIDIA H100 80GB HBM3" {
		t.Errorf("summary %q", got)
	}
	if got := round1(h.vramGB()); got != 159.3 {
		t.Errorf("vram %v", got)
	}
	mixed, _ := parseSMI("0, NVIDIA L4, 23034, 23034\n1, NVIDIA A10, 23028, 0\n2, NVIDIA L4, 23034, 1")
	if got := (hardware{GPUs: mixed}).gpuSummary(); got != "2x NVIDIA L4, 1x NVIDIA A10" {
		t.Errorf("mixed summary %q", got)
	}
	if gpus, err := parseSMI(""); err != nil || len(gpus) != 0 {
		t.Errorf("empty output: %v, %v", gpus, err)
	}
	for _, bad := range []string{"no comma here", "0, NVIDIA L4, [N/A], 1", "0, , 1024, 1", "0, NVIDIA L4, -1, 0",
		"NVIDIA L4, 1024, 1024", "x, NVIDIA L4, 1024, 1024", "0, NVIDIA L4, 1024, 2048", "0, 1024, 1024"} {
		if _, err := parseSMI(bad); err == nil {
			t.Errorf("parseSMI(%q) accepted", bad)
		}
	}
}

func TestCheckFit(t *testing.T) {
	l4 := []gpu{{Name: "NVIDIA L4", MemoryMiB: 24576, FreeMiB: 24576}}
	const free100 = 100 * gib
	cases := []struct {
		name    string
		vram    float64
		disk    float64
		hw      hardware
		present bool
		want    string // "" fits
	}{
		{"fits", 20, 50, hardware{SMIFound: true, GPUs: l4, DiskFree: free100}, false, ""},
		{"vram exactly", 24, 0, hardware{SMIFound: true, GPUs: l4, DiskFree: free100}, false, ""},
		{"too little vram", 80, 0, hardware{SMIFound: true, GPUs: l4, DiskFree: free100}, true,
			"model needs 80 GB VRAM, this box has 24.0 GB (1x NVIDIA L4)"},
		{"no gpu found", 8, 0, hardware{SMIFound: true, DiskFree: free100}, true,
			"model needs 8 GB VRAM, this box has 0.0 GB (no GPU found)"},
		{"nvidia-smi fails", 8, 0, hardware{SMIFound: true, GPUErr: errors.New("nvidia-smi failed: exit status 9"), DiskFree: free100}, true,
			"model needs 8 GB VRAM and the box's VRAM cannot be discovered: nvidia-smi failed: exit status 9"},
		{"no nvidia-smi: vram unchecked", 800, 0, hardware{DiskFree: free100}, true, ""},
		{"too little disk", 0, 150.5, hardware{DiskFree: free100}, false,
			"weights need 150.5 GB of disk, the models directory has 100.0 GB free"},
		{"weights present: disk unchecked", 0, 150, hardware{DiskFree: free100}, true, ""},
		{"statfs fails", 0, 1, hardware{DiskErr: errors.New("no such file")}, false,
			"weights need 1 GB of disk and free space cannot be discovered: no such file"},
		{"no needs", 0, 0, hardware{SMIFound: true, DiskErr: errors.New("x")}, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkFit(&fleetapi.VLLM{Model: "m", VRAMGB: c.vram, DiskGB: c.disk}, c.hw, c.present)
			if got := errString(err); got != c.want {
				t.Errorf("checkFit = %q, want %q", got, c.want)
			}
		})
	}
}

func TestDiscoverHardware(t *testing.T) {
	bin := t.TempDir()
	smi := filepath.Join(bin, "fake-smi")
	if err := os.WriteFile(smi, []byte("#!/bin/sh\necho '0, NVIDIA L4, 23034, 23034'\necho '1, NVIDIA L4, 23034, 23034'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := discoverHardware(context.Background(), smi, bin, diskFree)
	if !h.SMIFound || h.GPUErr != nil || len(h.GPUs) != 2 || h.DiskErr != nil || h.DiskFree == 0 {
		t.Errorf("discovered %+v", h)
	}
	d := h.discovered()
	if d.GPU != "2x NVIDIA L4" || d.GPUCount != 2 || d.VRAMGB != 45 {
		t.Errorf("report %+v", d)
	}

	broken := filepath.Join(bin, "broken-smi")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\necho 'NVIDIA-SMI has failed because it couldn'\\''t communicate with the NVIDIA driver' >&2\nexit 9\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h = discoverHardware(context.Background(), broken, bin, diskFree)
	if !h.SMIFound || h.GPUErr == nil || !strings.Contains(h.GPUErr.Error(), "couldn't communicate") {
		t.Errorf("broken nvidia-smi: %+v", h)
	}

	h = discoverHardware(context.Background(), "rolter-test-no-such-nvidia-smi", filepath.Join(bin, "missing"), diskFree)
	if h.SMIFound || h.DiskErr == nil {
		t.Errorf("absent: %+v", h)
	}
}

func TestLocateWeights(t *testing.T) {
	models := t.TempDir()
	hub := t.TempDir()
	t.Setenv("HF_HUB_CACHE", hub)
	mk := func(p string) {
		t.Helper()
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "config.json"), []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// hf in the models directory.
	mk(filepath.Join(models, "acme", "local-copy"))
	// hf in the cache: main → commit abc, and a pinned commit def.
	repoDir := filepath.Join(hub, "models--acme--cached")
	mk(filepath.Join(repoDir, "snapshots", "abc"))
	mk(filepath.Join(repoDir, "snapshots", "def"))
	if err := os.MkdirAll(filepath.Join(repoDir, "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repoDir, "refs", "main"), []byte("abc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// hf cached only at a commit, without refs/main.
	mk(filepath.Join(hub, "models--acme--pinned-only", "snapshots", "123"))
	// registry.
	mk(filepath.Join(models, "registry.internal_models_llama_v1"))
	if err := os.WriteFile(filepath.Join(models, "registry.internal_models_llama_v1", "model.safetensors"), []byte("w"), 0o644); err != nil {
		t.Fatal(err)
	}
	local := t.TempDir()

	cases := []struct {
		name    string
		v       fleetapi.VLLM
		model   string
		present bool
		env     string
		rev     string
		err     string
	}{
		{name: "local", v: fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "local", Path: local}}, model: local, present: true},
		{name: "local missing", v: fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "local", Path: "/nonexistent/weights"}},
			err: "local weights not found at /nonexistent/weights"},
		{name: "local relative", v: fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "local", Path: "weights"}}, err: "not absolute"},
		{name: "hf in models dir", v: fleetapi.VLLM{Model: "acme/local-copy", Source: fleetapi.Source{Kind: "hf"}},
			model: filepath.Join(models, "acme", "local-copy"), present: true},
		{name: "hf cached main", v: fleetapi.VLLM{Model: "served", Source: fleetapi.Source{Kind: "hf", Repo: "acme/cached"}},
			model: "acme/cached", present: true, env: "HF_HUB_OFFLINE=1"},
		{name: "hf cached pinned", v: fleetapi.VLLM{Model: "acme/cached", Source: fleetapi.Source{Kind: "hf", Revision: "def"}},
			model: "acme/cached", present: true, env: "HF_HUB_OFFLINE=1", rev: "def"},
		{name: "hf revision not cached", v: fleetapi.VLLM{Model: "acme/cached", Source: fleetapi.Source{Kind: "hf", Revision: "zzz"}},
			model: "acme/cached", rev: "zzz"},
		{name: "hf revision in args", v: fleetapi.VLLM{Model: "acme/cached", Source: fleetapi.Source{Kind: "hf"}, Args: []string{"--revision", "def"}},
			model: "acme/cached", present: true, env: "HF_HUB_OFFLINE=1"},
		{name: "hf commit without refs/main", v: fleetapi.VLLM{Model: "acme/pinned-only", Source: fleetapi.Source{Kind: "hf"}},
			model: "acme/pinned-only"},
		{name: "hf absent", v: fleetapi.VLLM{Model: "acme/absent", Source: fleetapi.Source{Kind: "hf"}}, model: "acme/absent"},
		{name: "hf traversal", v: fleetapi.VLLM{Model: "../../etc", Source: fleetapi.Source{Kind: "hf"}}, err: "not a valid repository id"},
		{name: "registry", v: fleetapi.VLLM{Model: "llama", Source: fleetapi.Source{Kind: "registry", Ref: "registry.internal/models/llama:v1"}},
			model: filepath.Join(models, "registry.internal_models_llama_v1"), present: true},
		{name: "registry absent", v: fleetapi.VLLM{Model: "llama", Source: fleetapi.Source{Kind: "registry", Ref: "registry.internal/models/llama:v2"}},
			err: "registry pulls are done by the box's image tooling"},
		{name: "url not http", v: fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "url", URL: "file:///etc/passwd"}}, err: "http(s) URL"},
		{name: "unknown kind", v: fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "s3"}}, err: `unknown source kind "s3"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := locateWeights(&c.v, models, http.DefaultClient)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if w.Model != c.model || w.Present != c.present || strings.Join(w.Env, " ") != c.env || w.Revision != c.rev {
				t.Errorf("got %+v, want model %q present %v env %q rev %q", w, c.model, c.present, c.env, c.rev)
			}
		})
	}
}

func TestDownloadURL(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Error("a download carries credentials")
		}
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("weights"))
	}))
	defer srv.Close()
	models := t.TempDir()
	v := &fleetapi.VLLM{Model: "m", Source: fleetapi.Source{Kind: "url", URL: srv.URL + "/missing?token=s3cr3t"}}
	w, err := locateWeights(v, models, srv.Client())
	if err != nil || w.Present || w.download == nil {
		t.Fatalf("%+v, %v", w, err)
	}
	_, err = w.download(context.Background(), &progress{})
	if err == nil || !strings.Contains(err.Error(), "404") || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("download error %v", err)
	}
	if entries, _ := os.ReadDir(models); len(entries) != 0 {
		t.Errorf("a failed download left %v", entries)
	}

	v.Source.URL = srv.URL + "/"
	w, _ = locateWeights(v, models, srv.Client())
	p, err := w.download(context.Background(), &progress{})
	if err != nil || filepath.Base(p) != "model" {
		t.Fatalf("download = %q, %v", p, err)
	}
	if w, _ := locateWeights(v, models, srv.Client()); !w.Present || w.Model != p {
		t.Errorf("after download: %+v", w)
	}
}

func TestRedactArgs(t *testing.T) {
	got := redactArgs([]string{"vllm", "serve", "m", "--api-key", "K1", "--hf-token=T1", "--max-model-len", "4096", "--api-key=K2", "--secret-thing", "--port", "8000"})
	want := "vllm serve m --api-key [redacted] --hf-token=[redacted] --max-model-len 4096 --api-key=[redacted] --secret-thing --port 8000"
	if got != want {
		t.Errorf("redactArgs =\n%s\nwant\n%s", got, want)
	}
}

// Issue 22, agent help text: LaunchDoc (rolter agent -h) says what prepare
// does: COMMAND serve MODEL --port P, the recipe's args, the key only in
// the environment as VLLM_API_KEY.
func TestLaunchMatchesDoc(t *testing.T) {
	for _, want := range []string{"COMMAND serve MODEL --port P", "VLLM_API_KEY", "never in argv", "--served-model-name", "--revision"} {
		if !strings.Contains(LaunchDoc, want) {
			t.Errorf("LaunchDoc does not say %q: %s", want, LaunchDoc)
		}
	}
	if strings.Contains(LaunchDoc, "--api-key") {
		t.Errorf("LaunchDoc names --api-key, which the agent never passes: %s", LaunchDoc)
	}
	a, err := New(Config{Server: "http://127.0.0.1:1", FleetKey: wrongKey, StateDir: t.TempDir(), NvidiaSMI: "rolter-test-no-such-nvidia-smi",
		Command: []string{"python", "-m", "vllm.entrypoints"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HF_HOME", t.TempDir())
	as := hfAssignment(1, 8000)
	v := *as.Recipe.VLLM
	v.Args = []string{"--max-model-len", "4096"}
	as.Recipe.VLLM = &v
	l, err := a.prepare(context.Background(), as, hardware{DiskFree: gib})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(l.argv, " ")
	if want := "python -m vllm.entrypoints serve " + v.Model + " --port 8000 --max-model-len 4096"; !strings.HasPrefix(got, want) {
		t.Errorf("argv = %s, want it to start %s", got, want)
	}
	if strings.Contains(got, "--api-key") || strings.Contains(got, testAPIKey) {
		t.Errorf("the key is in argv: %s", got)
	}
	if !slices.Contains(l.env, "VLLM_API_KEY="+testAPIKey) {
		t.Error("VLLM_API_KEY is not in the child's environment")
	}
}

func TestPrepareRefusesBadAssignments(t *testing.T) {
	a, err := New(Config{Server: "http://127.0.0.1:1", FleetKey: wrongKey, StateDir: t.TempDir(), NvidiaSMI: "rolter-test-no-such-nvidia-smi"})
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("VLLM_API_KEY", "inherited-foreign-key")
	base := hfAssignment(1, 8000)
	cases := map[string]func(*fleetapi.Assignment){
		"the recipe has no vllm block": func(a *fleetapi.Assignment) { a.Recipe.VLLM = nil },
		"the recipe has no model":      func(a *fleetapi.Assignment) { a.Recipe.VLLM.Model = "" },
		"invalid port 0":               func(a *fleetapi.Assignment) { a.Port = 0 },
		"has no api_key":               func(a *fleetapi.Assignment) { a.APIKey = "" },
		"must not set --port":          func(a *fleetapi.Assignment) { a.Recipe.VLLM.Args = []string{"--port=9"} },
		"must not set --api-key":       func(a *fleetapi.Assignment) { a.Recipe.VLLM.Args = []string{"--api-key", "x"} },
	}
	for want, mutate := range cases {
		as := base
		v := *base.Recipe.VLLM
		as.Recipe.VLLM = &v
		mutate(&as)
		if _, err := a.prepare(context.Background(), as, hardware{DiskFree: gib}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
	// hf pinned to a revision and served under another name.
	as := base
	as.Recipe.VLLM = &fleetapi.VLLM{Model: "chat", Source: fleetapi.Source{Kind: "hf", Repo: "acme/big", Revision: "v2"}}
	l, err := a.prepare(context.Background(), as, hardware{DiskFree: gib})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(l.argv, " ")
	if want := "vllm serve acme/big --port 8000 --served-model-name chat --revision v2"; got != want {
		t.Errorf("argv = %s\nwant %s", got, want)
	}
	// The key travels in the environment, once, and an inherited one is dropped.
	keys := 0
	for _, kv := range l.env {
		if strings.HasPrefix(kv, "VLLM_API_KEY=") {
			keys++
			if kv != "VLLM_API_KEY="+testAPIKey {
				t.Errorf("env has %s", kv)
			}
		}
	}
	if keys != 1 {
		t.Errorf("%d VLLM_API_KEY entries in the child's environment", keys)
	}
	if _, err := New(Config{Server: "ftp://x", FleetKey: wrongKey, StateDir: "s"}); err == nil {
		t.Error("New accepted a non-http server")
	}
	if _, err := New(Config{Server: "http://x", StateDir: "s"}); err == nil {
		t.Error("New accepted no fleet key")
	}
}
