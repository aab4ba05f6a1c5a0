// Package fleetapi is the wire contract between rolter's fleet endpoints
// (GET /vllm/config, POST /vllm/report) and `rolter agent` on a GPU box, and
// the recipe a host carries (design 002, SPEC §7).
//
// Both sides import these types, so the contract has one definition. The
// revision of an assignment is computed here, from the canonical JSON of the
// parts the box acts on.
package fleetapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
)

// Paths of the fleet endpoints, relative to the gateway's base URL.
const (
	ConfigPath = "/vllm/config"
	ReportPath = "/vllm/report"
)

// Recipe is what a box must run for one host. Only the vllm block exists
// today.
type Recipe struct {
	VLLM *VLLM `json:"vllm"`
}

// VLLM is the vllm block of a recipe (design 002, "model_info.vllm").
type VLLM struct {
	// Model is what vLLM is told to load; it is also the served model name
	// unless args carry --served-model-name.
	Model  string `json:"model"`
	Source Source `json:"source"`
	// VRAMGB and DiskGB are the model's needs. The box checks them against
	// the hardware it discovers; they are never taken as the box's capacity.
	VRAMGB float64  `json:"vram_gb"`
	DiskGB float64  `json:"disk_gb"`
	Args   []string `json:"args,omitempty"`
	// KVCache is "" (vLLM sizes its KV cache from the args) or KVCacheAuto:
	// the box calibrates it, a first conservative launch, then a relaunch
	// with the exact --kv-cache-memory vLLM reported wanting (issue 18).
	// Empty is omitted, so recipes without it keep their revision.
	KVCache string `json:"kv_cache,omitempty"`
}

// KVCacheAuto is the recipe's kv_cache value that asks for calibration.
const KVCacheAuto = "auto"

// Source says where the weights come from.
type Source struct {
	// Kind is one of hf, url, registry, local.
	Kind string `json:"kind"`
	// Repo (hf) defaults to the recipe's model; Revision pins it.
	Repo     string `json:"repo,omitempty"`
	Revision string `json:"revision,omitempty"`
	// URL (url) is an http(s) address of an archive or a single file.
	URL string `json:"url,omitempty"`
	// Ref (registry) names an image or artifact in an internal registry.
	Ref string `json:"ref,omitempty"`
	// Path (local) is an absolute directory on the box.
	Path string `json:"path,omitempty"`
}

// Source kinds.
const (
	SourceHF       = "hf"
	SourceURL      = "url"
	SourceRegistry = "registry"
	SourceLocal    = "local"
)

// Assignment is one vLLM a box must run: GET /vllm/config lists one per
// non-retired host at the caller's IP.
type Assignment struct {
	HostID    int64  `json:"host_id"`
	ModelName string `json:"model_name"` // the route it serves
	Port      int    `json:"port"`
	// APIKey is what vLLM must require (the agent passes it as
	// VLLM_API_KEY, vLLM's --api-key); the gateway sends it.
	APIKey string `json:"api_key"`
	// HFToken is the credential for an hf source (issue 18); absent when
	// the host has none. Only this host's box receives it; the agent
	// passes it to vLLM as HF_TOKEN in its environment. It is part of the
	// revision, so a rotated token reaches the box like any other change.
	HFToken string `json:"hf_token,omitempty"`
	Recipe  Recipe `json:"recipe"`
	// Revision is Revision(assignment): equal payloads, equal revisions.
	Revision string `json:"revision"`
	// Apply is set by an operator (POST .../hosts/{id}/apply) and cleared
	// when the box reports the current revision applied.
	Apply bool `json:"apply"`
	// AutoApply lets the box restart on a new revision without Apply.
	AutoApply bool `json:"auto_apply"`
	// Drain, when set, says the gateway is draining the host before its
	// restart. The gateway withholds Apply and AutoApply (sends false)
	// until the drain is DrainDrained, so an agent that does not know this
	// field never restarts early; an agent that does also holds any
	// restart while State is DrainDraining.
	Drain *Drain `json:"drain,omitempty"`
}

// Drain is the gateway's drain of a host before a restart (issue 18).
type Drain struct {
	// State is DrainDraining (in-flight requests may still run: do not
	// restart) or DrainDrained (the box may restart now).
	State string `json:"state"`
	// Deadline is when the gateway cuts what still runs and lets the box
	// restart, whatever its in-flight count.
	Deadline time.Time `json:"deadline"`
}

// Drain states.
const (
	DrainDraining = "draining"
	DrainDrained  = "drained"
)

// RestartAllowed reports whether the box may restart a running vLLM onto
// a's revision: an operator's apply or auto-apply, and no drain still
// running.
func (a *Assignment) RestartAllowed() bool {
	return (a.Apply || a.AutoApply) && (a.Drain == nil || a.Drain.State == DrainDrained)
}

// Config is the body of GET /vllm/config. An IP with no hosts gets an empty
// list.
type Config struct {
	IP          string       `json:"ip"`
	Assignments []Assignment `json:"assignments"`
}

// Report is the body of POST /vllm/report.
type Report struct {
	Applied    []Applied  `json:"applied"`
	Discovered Discovered `json:"discovered"`
}

// Applied is the state of one assignment on the box.
type Applied struct {
	HostID int64 `json:"host_id"`
	// Revision is the revision of the assignment the running vLLM was
	// started from; empty when nothing runs.
	Revision string `json:"revision"`
	// Error says why the box does not run the assignment (a fit check
	// failed, the launch failed, its weights are still downloading);
	// empty when it runs.
	Error string `json:"error,omitempty"`
	// Fit is FitChecked when the box checked VRAM and placed the vLLM on
	// GPUs, FitUnchecked when it could not (no nvidia-smi). Absent from an
	// agent older than issue 18.
	Fit string `json:"fit,omitempty"`
	// GPUs are the GPU indexes (nvidia-smi's, PCI bus order) the vLLM was
	// given through CUDA_VISIBLE_DEVICES.
	GPUs []int `json:"gpus,omitempty"`
	// KVCache is the kv-cache calibration of a recipe with kv_cache: auto.
	KVCache *KVCache `json:"kv_cache,omitempty"`
	// Download is the progress of the weights the assignment waits for;
	// absent when it waits for none. A gateway older than this field
	// refuses it as unknown: the agent then sends the report again
	// without it (Error still says "downloading").
	Download *Download `json:"download,omitempty"`
}

// Fit values of Applied.Fit.
const (
	FitChecked   = "checked"
	FitUnchecked = "unchecked"
)

// KVCache is how far the calibration of a kv_cache: auto recipe went.
type KVCache struct {
	// State is KVCalibrating (the conservative first launch runs),
	// KVCalibrated (relaunched with Bytes) or KVFailed (Error says why; the
	// conservative launch keeps serving).
	State string `json:"state"`
	// InitialBytes is the KV cache the conservative launch got, from
	// vLLM's "Available KV cache memory" line; 0 until it is logged.
	InitialBytes int64 `json:"initial_bytes,omitempty"`
	// Bytes is the --kv-cache-memory vLLM asked for and was relaunched
	// with; 0 until then.
	Bytes int64  `json:"bytes,omitempty"`
	Error string `json:"error,omitempty"`
}

// KVCache states.
const (
	KVCalibrating = "calibrating"
	KVCalibrated  = "calibrated"
	KVFailed      = "failed"
)

// Download is the progress of one weights download on the box.
type Download struct {
	// State is DownloadFetching (bytes come over the network) or
	// DownloadUnpacking (an archive is being unpacked).
	State string `json:"state"`
	// BytesDone counts the bytes fetched (or, unpacking, written) so far,
	// a resumed download's earlier bytes included.
	BytesDone int64 `json:"bytes_done"`
	// BytesTotal is the size the server announced; 0 when unknown (and
	// while unpacking, whose total is known only at the end).
	BytesTotal int64 `json:"bytes_total"`
}

// Download states.
const (
	DownloadFetching  = "downloading"
	DownloadUnpacking = "unpacking"
)

// Discovered is what the box sees of itself.
type Discovered struct {
	GPU         string  `json:"gpu,omitempty"` // e.g. "2x NVIDIA H100 80GB HBM3"
	GPUCount    int     `json:"gpu_count"`
	VRAMGB      float64 `json:"vram_gb"`      // total over all GPUs; 0 when no GPU was found
	DiskFreeGB  float64 `json:"disk_free_gb"` // at the agent's models directory
	VLLMVersion string  `json:"vllm_version,omitempty"`
}

// Revision hashes the parts of a the box acts on: host, route, port, API
// key, hf token (only when set, so hosts without one keep their revision)
// and recipe. Apply, AutoApply and Revision itself are not part of it,
// so pressing "apply" does not make a new revision.
func Revision(a Assignment) string {
	payload := struct {
		HostID    int64  `json:"host_id"`
		ModelName string `json:"model_name"`
		Port      int    `json:"port"`
		APIKey    string `json:"api_key"`
		HFToken   string `json:"hf_token,omitempty"`
		Recipe    Recipe `json:"recipe"`
	}{a.HostID, a.ModelName, a.Port, a.APIKey, a.HFToken, a.Recipe}
	// Struct fields marshal in declaration order and args keep their order,
	// so the encoding of equal payloads is byte-identical.
	b, err := json.Marshal(payload) //nolint:gosec // G117: only hashed into the revision, never sent or logged
	if err != nil {
		panic("fleetapi: marshal revision payload: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// ServedName is the model name vLLM answers to under r: the first
// --served-model-name in args, else the model.
func (r *VLLM) ServedName() string {
	if v, ok := FlagValue(r.Args, "--served-model-name"); ok && v != "" {
		return v
	}
	return r.Model
}

// FlagValue returns the value of flag in args, written "--flag value" or
// "--flag=value"; ok is false when the flag is absent. A flag followed by
// another flag (or nothing) has the value "". Like vLLM's parser, it reads
// "--max_model_len" as "--max-model-len".
func FlagValue(args []string, flag string) (value string, ok bool) {
	for i := 0; i < len(args); i++ {
		name, v, hasValue := strings.Cut(args[i], "=")
		if !isFlag(name) || FlagName(name) != flag {
			continue
		}
		if hasValue {
			return v, true
		}
		if i+1 < len(args) && !isFlag(args[i+1]) {
			return args[i+1], true
		}
		return "", true
	}
	return "", false
}

// FlagName is the canonical spelling of a flag: underscores in the name
// become dashes, as vLLM's argument parser reads them.
func FlagName(name string) string {
	if !isFlag(name) {
		return name
	}
	return "--" + strings.ReplaceAll(name[2:], "_", "-")
}

func isFlag(s string) bool { return len(s) > 1 && s[0] == '-' && s[1] == '-' }
