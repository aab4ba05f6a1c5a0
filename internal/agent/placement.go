package agent

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/fleetapi"
)

// placement is where an assignment's vLLM runs: the GPUs it is given
// (CUDA_VISIBLE_DEVICES) and the VRAM it is counted to hold on each.
type placement struct {
	GPUs   []int   // nvidia-smi indexes; nil when fit is unchecked
	PerGPU float64 // GB held on each of GPUs (the recipe's vram_gb / len(GPUs))
	Fit    string  // fleetapi.FitChecked or fleetapi.FitUnchecked
}

// holding is VRAM another assignment of the box is counted to hold on a
// GPU.
type holding struct {
	host int64
	gb   float64
}

// gpuCount is how many GPUs vLLM uses under args: tensor_parallel_size ×
// pipeline_parallel_size (each 1 when unset).
func gpuCount(args []string) (n, tp int, err error) {
	tp, err = sizeFlag(args, "--tensor-parallel-size", "-tp")
	if err != nil {
		return 0, 0, err
	}
	pp, err := sizeFlag(args, "--pipeline-parallel-size", "-pp")
	if err != nil {
		return 0, 0, err
	}
	return tp * pp, tp, nil
}

// sizeFlag reads a parallel size written --long N, --long=N, -short N or
// -short=N (vLLM takes both spellings); 1 when absent.
func sizeFlag(args []string, long, short string) (int, error) {
	v, ok := fleetapi.FlagValue(args, long)
	if !ok {
		for i, a := range args {
			name, val, has := strings.Cut(a, "=")
			if name != short {
				continue
			}
			ok = true
			if has {
				v = val
			} else if i+1 < len(args) {
				v = args[i+1]
			}
			break
		}
	}
	if !ok {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > fleetapi.MaxGPUCount {
		return 0, fmt.Errorf("recipe args: %s must be a whole number from 1 to %d", long, fleetapi.MaxGPUCount)
	}
	return n, nil
}

// place chooses the GPUs of an assignment needing needGB of VRAM over n
// GPUs. What a GPU has available is the least of two figures: its memory
// less what the box's other assignments are counted to hold on it
// (others), and what nvidia-smi shows free now plus what the assignment's
// own previous vLLM holds there (self: it is stopped before the new one
// starts). The first keeps two assignments from being promised the same
// memory before either has allocated it; the second sees memory held
// outside rolter's accounting (another process, a vLLM above its recipe's
// figure). The n GPUs with the most available are taken, and each must
// have needGB/n.
func place(h hardware, needGB float64, n, tp int, others map[int][]holding, self map[int]float64) (placement, error) {
	if !h.SMIFound || h.GPUErr != nil {
		// Without nvidia-smi nothing can be checked; a failing one has
		// already refused a recipe with a VRAM need (checkFit).
		return placement{Fit: fleetapi.FitUnchecked}, nil
	}
	if len(h.GPUs) == 0 {
		return placement{Fit: fleetapi.FitChecked}, nil // checkFit refused any VRAM need
	}
	if n > len(h.GPUs) {
		return placement{}, fmt.Errorf("model needs %d GPUs (tensor_parallel_size %d × pipeline_parallel_size %d), this box has %d (%s)",
			n, tp, n/tp, len(h.GPUs), h.gpuSummary())
	}
	per := needGB / float64(n)
	type cand struct {
		g                  gpu
		total, free, avail float64
		held               []holding
	}
	cands := make([]cand, 0, len(h.GPUs))
	for _, g := range h.GPUs {
		c := cand{g: g, total: g.MemoryMiB / 1024, free: g.FreeMiB / 1024, held: others[g.Index]}
		reserved := 0.0
		for _, x := range c.held {
			reserved += x.gb
		}
		c.avail = max(0, min(c.total-reserved, c.free+self[g.Index]))
		cands = append(cands, c)
	}
	slices.SortStableFunc(cands, func(a, b cand) int {
		if a.avail != b.avail {
			return cmp.Compare(b.avail, a.avail)
		}
		return cmp.Compare(a.g.Index, b.g.Index)
	})
	const slack = 0.05 // GB: nvidia-smi's MiB rounding
	if cands[n-1].avail+slack >= per {
		p := placement{PerGPU: per, Fit: fleetapi.FitChecked}
		for _, c := range cands[:n] {
			p.GPUs = append(p.GPUs, c.g.Index)
		}
		slices.Sort(p.GPUs)
		return p, nil
	}

	// Refused: say what each GPU has and who holds what, so the operator
	// sees which assignments do not fit together.
	var hosts []int64
	var parts []string
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Compare(a.g.Index, b.g.Index) })
	for i, c := range cands {
		if i == 8 {
			parts = append(parts, fmt.Sprintf("%d more", len(cands)-i))
			break
		}
		var why []string
		for _, x := range c.held {
			why = append(why, fmt.Sprintf("host %d holds %s GB", x.host, num(round1(x.gb))))
			if !slices.Contains(hosts, x.host) {
				hosts = append(hosts, x.host)
			}
		}
		why = append(why, fmt.Sprintf("nvidia-smi shows %.1f GB free", c.free))
		parts = append(parts, fmt.Sprintf("GPU %d has %.1f of %.1f GB available (%s)", c.g.Index, c.avail, c.total, strings.Join(why, ", ")))
	}
	slices.Sort(hosts)
	beside := ""
	if len(hosts) > 0 {
		hs := make([]string, len(hosts))
		for i, id := range hosts {
			hs[i] = strconv.FormatInt(id, 10)
		}
		beside = " beside host " + strings.Join(hs, ", host ")
	}
	gpus := "1 GPU"
	if n > 1 {
		gpus = fmt.Sprintf("%d GPUs, %s GB each", n, num(round1(per)))
	}
	return placement{}, fmt.Errorf("model needs %s GB VRAM on %s and does not fit%s: %s",
		num(needGB), gpus, beside, strings.Join(parts, "; "))
}

// holdings is what the box's assignments other than host are counted to
// hold per GPU, and what host's own running vLLM holds.
func (a *Agent) holdings(host int64) (others map[int][]holding, self map[int]float64) {
	others, self = map[int][]holding{}, map[int]float64{}
	for id, c := range a.children {
		for _, g := range c.place.GPUs {
			if id == host {
				self[g] += c.place.PerGPU
			} else {
				others[g] = append(others[g], holding{host: id, gb: c.place.PerGPU})
			}
		}
	}
	for g := range others {
		slices.SortFunc(others[g], func(x, y holding) int { return cmp.Compare(x.host, y.host) })
	}
	return others, self
}

// gpuEnv is the environment that confines vLLM to p's GPUs. nvidia-smi
// numbers GPUs in PCI bus order; CUDA does too only when told.
func (p placement) gpuEnv() []string {
	if p.GPUs == nil {
		return nil
	}
	ids := make([]string, len(p.GPUs))
	for i, g := range p.GPUs {
		ids[i] = strconv.Itoa(g)
	}
	return []string{"CUDA_DEVICE_ORDER=PCI_BUS_ID", "CUDA_VISIBLE_DEVICES=" + strings.Join(ids, ",")}
}
