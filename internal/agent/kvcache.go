package agent

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"sync"

	"github.com/rolter/rolter/internal/fleetapi"
)

// kv-cache calibration (design 002, issue 18). A recipe with kv_cache:
// auto is first launched conservatively: no --kv-cache-memory, a
// --gpu-memory-utilization within its share of the GPUs, and vLLM's log at
// debug level. vLLM then logs the byte count it wants; the agent relaunches
// it with exactly that --kv-cache-memory, before it serves. Both figures
// are reported; the calibrated one is kept in the state file, so the next
// start of the same revision on the same GPUs skips the first launch.
//
// The lines, as vLLM's vllm/v1/worker/gpu_worker.py writes them (read in
// its source, Worker.determine_available_memory and
// Worker.compile_or_warm_up_model):
//
//	logger.info_once("Available KV cache memory: %s GiB", format_gib(...))
//
//	"Free memory on device (F/T GiB) on startup. Desired GPU memory
//	utilization is (U, R GiB). Actual usage is ... Replace
//	gpu_memory_utilization config with `--kv-cache-memory=N` (X GiB) to
//	fit into requested memory, or `--kv-cache-memory=M` (Y GiB) to fully
//	utilize gpu memory. Current kv cache memory in use is Z GiB."
//
// The second is written only when --kv-cache-memory is not set, at INFO in
// some releases and at DEBUG in current ones: hence VLLM_LOGGING_LEVEL=DEBUG
// for the first launch. The agent takes N, the figure that fits the
// requested utilization, since a GPU may be shared with the box's other
// assignments; M would take all the memory free at start-up.
var (
	kvAvailableLine = regexp.MustCompile(`Available KV cache memory: ([0-9]+(?:\.[0-9]+)?) GiB`)
	kvSuggestedLine = regexp.MustCompile("`--kv-cache-memory=([0-9]+)` \\([0-9.]+ GiB\\) to fit into requested memory")
	// Uvicorn's line once vLLM's API server is up: past the point where
	// vLLM writes its figure.
	kvServingLine = regexp.MustCompile(`Application startup complete`)
)

const (
	// conservativeUtil is the first launch's --gpu-memory-utilization when
	// neither the recipe nor the placement says less (vLLM's default is
	// 0.9).
	conservativeUtil = 0.8
	// maxKVScan bounds how much of one launch's log is read for the
	// figures.
	maxKVScan = 64 << 20
)

// kvRecord is a calibration kept in the state file.
type kvRecord struct {
	Revision     string `json:"revision"`
	GPUs         []int  `json:"gpus,omitempty"`
	InitialBytes int64  `json:"initial_bytes"`
	Bytes        int64  `json:"bytes"`
}

// kvCalib is the calibration of one child. Its supervisor goroutine
// writes it; the agent reads it under mu.
type kvCalib struct {
	mu     sync.Mutex
	status fleetapi.KVCache
	// final is the argv and env of the calibrated launch: base argv plus
	// --kv-cache-memory, without the first launch's additions.
	base, env []string

	// Scan position in the log, owned by the supervisor.
	off     int64
	partial []byte
}

func (k *kvCalib) snapshot() *fleetapi.KVCache {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	s := k.status
	return &s
}

func (k *kvCalib) calibrating() bool {
	if k == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.status.State == fleetapi.KVCalibrating
}

// kvLaunch adapts a prepared launch to a kv_cache: auto recipe: with a
// record for the same revision and GPUs, the calibrated launch at once;
// else the conservative first launch, with the calibration to run.
func kvLaunch(l launch, as fleetapi.Assignment, hw hardware, rec *kvRecord) (launch, *kvCalib) {
	v := as.Recipe.VLLM
	if v == nil || v.KVCache != fleetapi.KVCacheAuto {
		return l, nil
	}
	k := &kvCalib{base: l.argv, env: l.env}
	if rec != nil && rec.Revision == as.Revision && slices.Equal(rec.GPUs, l.place.GPUs) && rec.Bytes > 0 {
		k.status = fleetapi.KVCache{State: fleetapi.KVCalibrated, InitialBytes: rec.InitialBytes, Bytes: rec.Bytes}
		l.argv = k.finalArgv(rec.Bytes)
		return l, k
	}
	k.status = fleetapi.KVCache{State: fleetapi.KVCalibrating}
	argv := slices.Clone(l.argv)
	if _, ok := fleetapi.FlagValue(v.Args, "--gpu-memory-utilization"); !ok {
		argv = append(argv, "--gpu-memory-utilization", strconv.FormatFloat(firstLaunchUtil(l.place, hw), 'f', -1, 64))
	}
	l.argv = argv
	l.env = append(slices.Clone(l.env), "VLLM_LOGGING_LEVEL=DEBUG")
	return l, k
}

// firstLaunchUtil is the conservative utilization: conservativeUtil, or
// less when the placement counts the model for less of its smallest GPU.
func firstLaunchUtil(p placement, hw hardware) float64 {
	u := conservativeUtil
	for _, g := range hw.GPUs {
		if slices.Contains(p.GPUs, g.Index) && g.MemoryMiB > 0 {
			u = min(u, p.PerGPU*1024/g.MemoryMiB)
		}
	}
	return max(0.05, math.Floor(u*100)/100)
}

func (k *kvCalib) finalArgv(bytes int64) []string {
	return append(slices.Clone(k.base), "--kv-cache-memory="+strconv.FormatInt(bytes, 10))
}

// scan reads what the current launch has added to the log since the last
// call and returns the argv to relaunch with once vLLM logged its figure
// (nil until then). It marks the calibration failed when vLLM serves
// without having logged one.
func (k *kvCalib) scan(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close() //nolint:errcheck // read only
	if k.off >= maxKVScan {
		k.fail("vLLM logged no --kv-cache-memory figure in the first %d MiB of its log", maxKVScan>>20)
		return nil
	}
	b, err := io.ReadAll(io.NewSectionReader(f, k.off, maxKVScan-k.off))
	if err != nil || len(b) == 0 {
		return nil
	}
	k.off += int64(len(b))
	b = append(k.partial, b...)
	end := bytes.LastIndexByte(b, '\n')
	if end < 0 {
		k.partial = b
		return nil
	}
	k.partial = slices.Clone(b[end+1:])
	sc := bufio.NewScanner(bytes.NewReader(b[:end+1]))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := kvAvailableLine.FindStringSubmatch(line); m != nil {
			if gibs, err := strconv.ParseFloat(m[1], 64); err == nil && gibs < fleetapi.MaxKVCacheBytes/gib {
				k.mu.Lock()
				k.status.InitialBytes = int64(gibs * gib)
				k.mu.Unlock()
			}
		}
		if m := kvSuggestedLine.FindStringSubmatch(line); m != nil {
			n, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil || n <= 0 || n > fleetapi.MaxKVCacheBytes {
				k.fail("vLLM's --kv-cache-memory figure is unusable: %s", m[1])
				return nil
			}
			k.mu.Lock()
			k.status.State, k.status.Bytes = fleetapi.KVCalibrated, n
			k.mu.Unlock()
			return k.finalArgv(n)
		}
		if kvServingLine.MatchString(line) {
			k.fail("vLLM served without logging a --kv-cache-memory figure; it runs at the conservative setting")
			return nil
		}
	}
	return nil
}

func (k *kvCalib) fail(format string, args ...any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.status.State = fleetapi.KVFailed
	k.status.Error = fmt.Sprintf(format, args...)
}
