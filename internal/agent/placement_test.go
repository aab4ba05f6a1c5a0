package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/testkit"
)

func TestGPUCount(t *testing.T) {
	cases := []struct {
		args    []string
		n, tp   int
		wantErr bool
	}{
		{nil, 1, 1, false},
		{[]string{"--tensor-parallel-size", "2"}, 2, 2, false},
		{[]string{"--tensor_parallel_size=4", "--pipeline-parallel-size", "2"}, 8, 4, false},
		{[]string{"-tp", "2", "-pp=3"}, 6, 2, false},
		{[]string{"--tensor-parallel-size", "0"}, 0, 0, true},
		{[]string{"--tensor-parallel-size", "two"}, 0, 0, true},
		{[]string{"-tp"}, 0, 0, true},
		{[]string{"--pipeline-parallel-size", "65"}, 0, 0, true},
	}
	for _, c := range cases {
		n, tp, err := gpuCount(c.args)
		if (err != nil) != c.wantErr || n != c.n || tp != c.tp {
			t.Errorf("gpuCount(%q) = %d, %d, %v", c.args, n, tp, err)
		}
	}
}

func TestPlace(t *testing.T) {
	h100 := func(idx int, freeMiB float64) gpu {
		return gpu{Index: idx, Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81920, FreeMiB: freeMiB}
	}
	two := hardware{SMIFound: true, GPUs: []gpu{h100(0, 81920), h100(1, 81920)}}
	none := map[int][]holding{}
	cases := []struct {
		name   string
		hw     hardware
		need   float64
		n, tp  int
		others map[int][]holding
		self   map[int]float64
		gpus   []int
		want   string // error; "" places
	}{
		{"one gpu, first of equals", two, 40, 1, 1, none, nil, []int{0}, ""},
		{"beside another", two, 40, 1, 1, map[int][]holding{0: {{1, 60}}}, nil, []int{1}, ""},
		{"tensor parallel", two, 120, 2, 2, none, nil, []int{0, 1}, ""},
		{"packs onto a shared gpu", two, 20, 1, 1, map[int][]holding{0: {{1, 60}}, 1: {{2, 70}}}, nil, []int{0}, ""},
		{"does not fit beside others", two, 30, 1, 1, map[int][]holding{0: {{1, 60}}, 1: {{2, 70}}}, nil, nil,
			"model needs 30 GB VRAM on 1 GPU and does not fit beside host 1, host 2: " +
				"GPU 0 has 20.0 of 80.0 GB available (host 1 holds 60 GB, nvidia-smi shows 80.0 GB free); " +
				"GPU 1 has 10.0 of 80.0 GB available (host 2 holds 70 GB, nvidia-smi shows 80.0 GB free)"},
		{"too many gpus", two, 10, 4, 4, none, nil, nil,
			"model needs 4 GPUs (tensor_parallel_size 4 × pipeline_parallel_size 1), this box has 2 (2x NVIDIA H100 80GB HBM3)"},
		{"measured free memory counts", hardware{SMIFound: true, GPUs: []gpu{h100(0, 10240)}}, 40, 1, 1, none, nil, nil,
			"model needs 40 GB VRAM on 1 GPU and does not fit: GPU 0 has 10.0 of 80.0 GB available (nvidia-smi shows 10.0 GB free)"},
		{"its own old vllm is freed", hardware{SMIFound: true, GPUs: []gpu{h100(0, 10240)}}, 40, 1, 1, none, map[int]float64{0: 60}, []int{0}, ""},
		{"tensor parallel needs each share", two, 100, 2, 2, map[int][]holding{1: {{3, 40}}}, nil, nil,
			"model needs 100 GB VRAM on 2 GPUs, 50 GB each and does not fit beside host 3: " +
				"GPU 0 has 80.0 of 80.0 GB available (nvidia-smi shows 80.0 GB free); " +
				"GPU 1 has 40.0 of 80.0 GB available (host 3 holds 40 GB, nvidia-smi shows 80.0 GB free)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := place(c.hw, c.need, c.n, c.tp, c.others, c.self)
			if got := errString(err); got != c.want {
				t.Fatalf("err = %q\nwant  %q", got, c.want)
			}
			if err == nil && (!slices.Equal(p.GPUs, c.gpus) || p.Fit != fleetapi.FitChecked || p.PerGPU != c.need/float64(c.n)) {
				t.Errorf("placement %+v, want GPUs %v", p, c.gpus)
			}
		})
	}
	p, err := place(hardware{}, 40, 1, 1, none, nil)
	if err != nil || p.Fit != fleetapi.FitUnchecked || p.GPUs != nil || p.gpuEnv() != nil {
		t.Errorf("without nvidia-smi: %+v, %v", p, err)
	}
}

func envValue(env []string, name string) (string, bool) {
	for _, kv := range slices.Backward(env) {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v, true
		}
	}
	return "", false
}

// Fit against the box (issue 18 §3): the second of two assignments that
// do not fit together on the GPU is refused with the numbers and not
// started; each vLLM gets its GPUs through CUDA_VISIBLE_DEVICES; when the
// first goes, the second starts; memory another process takes (as
// nvidia-smi shows it) counts too.
func TestAgentFitAgainstOtherAssignments(t *testing.T) {
	e := newEnv(t)
	t.Setenv("CUDA_VISIBLE_DEVICES", "7") // the agent's own: overridden per assignment
	smi := e.fakeSMI("0, NVIDIA H100 80GB HBM3, 81920, 81920\n1, NVIDIA L4, 24576, 24576")
	fs := newFleetServer(t)
	p1, p2, p3 := freePort(t), freePort(t), freePort(t)
	first := hfAssignment(1, p1)
	first.Recipe.VLLM.VRAMGB = 50
	second := hfAssignment(2, p2)
	second.Recipe.VLLM.VRAMGB = 40
	small := hfAssignment(3, p3)
	small.Recipe.VLLM.VRAMGB = 20
	fs.set(first, small, second) // host 2 comes last: it meets hosts 1 and 3 running
	cfg := e.config(fs.url())
	cfg.NvidiaSMI = smi
	r := e.start(cfg)

	rec1 := e.waitRun(p1)
	rec3 := e.waitRun(p3)
	if v, _ := envValue(rec1.Env, "CUDA_VISIBLE_DEVICES"); v != "0" {
		t.Errorf("host 1 CUDA_VISIBLE_DEVICES = %q, want 0", v)
	}
	if v, _ := envValue(rec1.Env, "CUDA_DEVICE_ORDER"); v != "PCI_BUS_ID" {
		t.Errorf("host 1 CUDA_DEVICE_ORDER = %q, want PCI_BUS_ID", v)
	}
	if v, _ := envValue(rec3.Env, "CUDA_VISIBLE_DEVICES"); v != "0" {
		t.Errorf("host 3 (20 GB, the H100 has 30 left, the L4 24) CUDA_VISIBLE_DEVICES = %q, want 0", v)
	}
	const reason = "model needs 40 GB VRAM on 1 GPU and does not fit beside host 1, host 3: " +
		"GPU 0 has 10.0 of 80.0 GB available (host 1 holds 50 GB, host 3 holds 20 GB, nvidia-smi shows 80.0 GB free); " +
		"GPU 1 has 24.0 of 24.0 GB available (nvidia-smi shows 24.0 GB free)"
	testkit.Eventually(t, "host 2 reported as not fitting beside host 1", func() bool {
		ap, _, ok := fs.applied(2)
		return ok && ap.Revision == "" && ap.Error == reason && ap.Fit == ""
	})
	ap1, _, _ := fs.applied(1)
	if ap1.Fit != fleetapi.FitChecked || !slices.Equal(ap1.GPUs, []int{0}) {
		t.Errorf("host 1 reported %+v, want fit checked on GPU 0", ap1)
	}
	if _, ok := e.record(p2); ok {
		t.Fatal("host 2 was started although it does not fit")
	}
	if n := strings.Count(e.logs.String(), reason); n != 1 {
		t.Errorf("the refusal is logged %d times, want once", n)
	}

	// Host 1 goes: host 2 fits now and starts on the H100.
	fs.set(second, small)
	rec2 := e.waitRun(p2)
	if v, _ := envValue(rec2.Env, "CUDA_VISIBLE_DEVICES"); v != "0" {
		t.Errorf("host 2 CUDA_VISIBLE_DEVICES = %q, want 0", v)
	}
	testkit.Eventually(t, "host 2 running in a report", func() bool {
		ap, _, ok := fs.applied(2)
		return ok && ap.Revision == fleetapi.Revision(second) && ap.Error == "" && slices.Equal(ap.GPUs, []int{0})
	})

	// Another process takes most of the L4: a tensor-parallel recipe over
	// both GPUs is refused on what nvidia-smi shows free.
	e.setGPUs("0, NVIDIA H100 80GB HBM3, 81920, 20480\n1, NVIDIA L4, 24576, 4096")
	p4 := freePort(t)
	tp := hfAssignment(4, p4, "--tensor-parallel-size", "2")
	tp.Recipe.VLLM.VRAMGB = 16
	fs.set(second, small, tp)
	testkit.Eventually(t, "host 4 refused on measured free memory", func() bool {
		ap, _, ok := fs.applied(4)
		return ok && strings.HasPrefix(ap.Error, "model needs 16 GB VRAM on 2 GPUs, 8 GB each and does not fit beside host 2, host 3: ") &&
			strings.Contains(ap.Error, "GPU 1 has 4.0 of 24.0 GB available (nvidia-smi shows 4.0 GB free)")
	})
	e.setGPUs("0, NVIDIA H100 80GB HBM3, 81920, 20480\n1, NVIDIA L4, 24576, 24576")
	rec4 := e.waitRun(p4)
	if v, _ := envValue(rec4.Env, "CUDA_VISIBLE_DEVICES"); v != "0,1" {
		t.Errorf("host 4 CUDA_VISIBLE_DEVICES = %q, want 0,1", v)
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// Without nvidia-smi the report says fit was unchecked, and vLLM gets no
// GPU selection of the agent's (it keeps the agent's own environment).
func TestAgentFitUncheckedWithoutSMI(t *testing.T) {
	e := newEnv(t)
	t.Setenv("CUDA_VISIBLE_DEVICES", "3")
	fs := newFleetServer(t)
	port := freePort(t)
	as := hfAssignment(5, port)
	as.Recipe.VLLM.VRAMGB = 4000
	fs.set(as)
	e.start(e.config(fs.url()))
	rec := e.waitRun(port)
	if v, _ := envValue(rec.Env, "CUDA_VISIBLE_DEVICES"); v != "3" {
		t.Errorf("CUDA_VISIBLE_DEVICES = %q, want the inherited 3", v)
	}
	testkit.Eventually(t, "a report saying fit was unchecked", func() bool {
		ap, _, ok := fs.applied(5)
		return ok && ap.Revision == fleetapi.Revision(as) && ap.Fit == fleetapi.FitUnchecked && ap.GPUs == nil
	})
	if _, err := os.Stat(filepath.Join(e.state, stateFile)); err != nil {
		t.Fatal(err)
	}
}

// A gateway from before issue 18 refuses the new report fields (it parses
// strictly); the agent falls back to the fields it knows and keeps
// reporting.
func TestAgentReportsToAnOlderGateway(t *testing.T) {
	e := newEnv(t)
	fs := newFleetServer(t)
	fs.mu.Lock()
	fs.legacy = true
	fs.mu.Unlock()
	e.reportEvery = 300 * time.Millisecond // an unchanged report goes out as a heartbeat
	port := freePort(t)
	as := hfAssignment(6, port)
	fs.set(as)
	e.start(e.config(fs.url()))
	testkit.Eventually(t, "three reports accepted by the older gateway", func() bool {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return len(fs.reports) >= 3
	})
	fs.mu.Lock()
	refused := fs.refused
	fs.mu.Unlock()
	if refused != 1 {
		t.Errorf("the older gateway refused %d reports, want 1 (then the agent sends the old shape)", refused)
	}
	if ap, _, _ := fs.applied(6); ap.Revision != fleetapi.Revision(as) || ap.Fit != "" {
		t.Errorf("reported %+v", ap)
	}
	if !strings.Contains(e.logs.String(), "reporting without them") {
		t.Error("the fallback is not logged")
	}
}
