package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/fleetapi"
)

// gpu is one GPU as nvidia-smi lists it.
type gpu struct {
	// Index is nvidia-smi's index, in PCI bus order: the number
	// CUDA_VISIBLE_DEVICES takes under CUDA_DEVICE_ORDER=PCI_BUS_ID.
	Index     int
	Name      string
	MemoryMiB float64
	// FreeMiB is what nvidia-smi shows free now, whoever holds the rest;
	// MemoryMiB when the driver does not say ([N/A]).
	FreeMiB float64
}

// hardware is what the box sees of itself at one moment. Fit checks use it
// and nothing else: a figure typed into a recipe is a need, never a
// capacity.
type hardware struct {
	// SMIFound is false when nvidia-smi is not installed: no GPU can be
	// discovered and the VRAM check is skipped (with a warning).
	SMIFound bool
	GPUs     []gpu
	GPUErr   error // nvidia-smi is there but failed or printed garbage

	DiskFree uint64 // bytes at the models directory
	DiskErr  error
}

const gib = 1 << 30

// vramGB is the total VRAM in GB of 1024 MiB.
func (h hardware) vramGB() float64 {
	var mib float64
	for _, g := range h.GPUs {
		mib += g.MemoryMiB
	}
	return mib / 1024
}

func (h hardware) diskFreeGB() float64 { return float64(h.DiskFree) / gib }

// gpuSummary names the GPUs: "2x NVIDIA H100 80GB HBM3", or
// "1x NVIDIA L4, 1x NVIDIA A10" on a mixed box; "" without GPUs.
func (h hardware) gpuSummary() string {
	var names []string
	count := map[string]int{}
	for _, g := range h.GPUs {
		if count[g.Name] == 0 {
			names = append(names, g.Name)
		}
		count[g.Name]++
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%dx %s", count[n], n)
	}
	return strings.Join(parts, ", ")
}

func (h hardware) discovered() fleetapi.Discovered {
	d := fleetapi.Discovered{
		GPU:      h.gpuSummary(),
		GPUCount: len(h.GPUs),
		VRAMGB:   round1(h.vramGB()),
	}
	if h.DiskErr == nil {
		d.DiskFreeGB = round1(h.diskFreeGB())
	}
	return d
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// smiArgs is the query the agent runs; its output is parsed by parseSMI.
var smiArgs = []string{"--query-gpu=index,name,memory.total,memory.free", "--format=csv,noheader,nounits"}

// parseSMI reads `nvidia-smi --query-gpu=index,name,memory.total,memory.free
// --format=csv,noheader,nounits`: one "index, name, MiB, MiB" line per GPU.
// The name may hold commas; the numbers are the first and last two fields.
func parseSMI(out string) ([]gpu, error) {
	var gpus []gpu
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		bad := fmt.Errorf("nvidia-smi: unexpected line %q", line)
		first := strings.IndexByte(line, ',')
		last := strings.LastIndexByte(line, ',')
		if first < 0 || last <= first {
			return nil, bad
		}
		mid := strings.LastIndexByte(line[:last], ',')
		if mid <= first {
			return nil, bad
		}
		idx, err := strconv.Atoi(strings.TrimSpace(line[:first]))
		if err != nil || idx < 0 {
			return nil, bad
		}
		name := strings.TrimSpace(line[first+1 : mid])
		total, err := strconv.ParseFloat(strings.TrimSpace(line[mid+1:last]), 64)
		if err != nil || total < 0 || name == "" {
			return nil, bad
		}
		free, err := strconv.ParseFloat(strings.TrimSpace(line[last+1:]), 64)
		if err != nil {
			free = total // [N/A]: the driver does not say; the recipes' accounting still applies
		}
		if free < 0 || free > total {
			return nil, bad
		}
		gpus = append(gpus, gpu{Index: idx, Name: name, MemoryMiB: total, FreeMiB: free})
	}
	return gpus, nil
}

// discoverHardware runs nvidia-smi (when found on PATH) and disk (statfs:
// diskFree) on the models directory.
func discoverHardware(ctx context.Context, smi, modelsDir string, disk func(string) (uint64, error)) hardware {
	var h hardware
	if path, err := exec.LookPath(smi); err == nil {
		h.SMIFound = true
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		out, err := exec.CommandContext(ctx, path, smiArgs...).Output()
		cancel()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) && len(ee.Stderr) > 0 {
				err = fmt.Errorf("%w: %s", err, firstLine(string(ee.Stderr)))
			}
			h.GPUErr = fmt.Errorf("nvidia-smi failed: %w", err)
		} else {
			h.GPUs, h.GPUErr = parseSMI(string(out))
		}
	}
	h.DiskFree, h.DiskErr = disk(modelsDir)
	return h
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// checkFit says whether a model with recipe v can run on h. The VRAM check
// needs nvidia-smi (skipped without it); the disk check applies only when
// the weights still have to be fetched.
func checkFit(v *fleetapi.VLLM, h hardware, weightsPresent bool) error {
	if v.VRAMGB > 0 && h.SMIFound {
		if h.GPUErr != nil {
			return fmt.Errorf("model needs %s GB VRAM and the box's VRAM cannot be discovered: %v", num(v.VRAMGB), h.GPUErr)
		}
		if have := h.vramGB(); v.VRAMGB > have {
			gpus := h.gpuSummary()
			if gpus == "" {
				gpus = "no GPU found"
			}
			return fmt.Errorf("model needs %s GB VRAM, this box has %.1f GB (%s)", num(v.VRAMGB), have, gpus)
		}
	}
	if v.DiskGB > 0 && !weightsPresent {
		if h.DiskErr != nil {
			return fmt.Errorf("weights need %s GB of disk and free space cannot be discovered: %v", num(v.DiskGB), h.DiskErr)
		}
		if free := h.diskFreeGB(); v.DiskGB > free {
			return fmt.Errorf("weights need %s GB of disk, the models directory has %.1f GB free", num(v.DiskGB), free)
		}
	}
	return nil
}

// num formats a recipe figure as typed: 80, 7.5.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
