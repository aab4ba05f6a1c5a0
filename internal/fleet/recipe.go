// Package fleet is rolter's vLLM fleet control plane (design 002, SPEC §7):
// recipe rules, the box-facing endpoints GET /vllm/config and POST
// /vllm/report, and the controller that registers a host's route target
// only while its vLLM is serving.
package fleet

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/store"
)

// Contract flags are the vLLM arguments that change what a caller sees, so
// every host behind one model_name must agree on them (design 002, "model_name
// is a contract with callers"). Tuning flags (--gpu-memory-utilization,
// --kv-cache-memory, --tensor-parallel-size, ...) may differ.
var contractFlags = []string{
	"--max-model-len",
	"--tool-call-parser",
	"--enable-auto-tool-choice",
	"--reasoning-parser",
	"--chat-template",
}

// reservedFlags are set by the agent from the host record.
var reservedFlags = map[string]string{
	"--port":    "the host's port field",
	"--api-key": "the host's generated API key",
	// A config file could set any of the above, and the contract flags,
	// out of sight of validation.
	"--config": "the recipe's args (a config file would hide flags from validation)",
}

// Param is one caller-visible parameter of a recipe.
type Param struct {
	Name  string // "served model name" or a flag
	Value string // "(unset)" when absent; "(set)" for a present boolean flag
}

// ContractParams lists r's caller-visible parameters in a fixed order.
func ContractParams(r *fleetapi.VLLM) []Param {
	out := []Param{{Name: "served model name", Value: r.ServedName()}}
	for _, f := range contractFlags {
		v, ok := fleetapi.FlagValue(r.Args, f)
		switch {
		case !ok:
			v = "(unset)"
		case v == "":
			v = "(set)"
		}
		out = append(out, Param{Name: f, Value: v})
	}
	return out
}

// ContractDiff returns the first caller-visible parameter on which a and b
// differ, and false when they agree.
func ContractDiff(a, b *fleetapi.VLLM) (name, va, vb string, differ bool) {
	pa, pb := ContractParams(a), ContractParams(b)
	for i := range pa {
		if pa[i].Value != pb[i].Value {
			return pa[i].Name, pa[i].Value, pb[i].Value, true
		}
	}
	return "", "", "", false
}

// MaxModelLen is r's --max-model-len, 0 when unset.
func MaxModelLen(r *fleetapi.VLLM) int {
	v, _ := fleetapi.FlagValue(r.Args, "--max-model-len")
	n, _ := strconv.Atoi(v)
	return n
}

// ValidateRecipe checks a recipe and returns field errors keyed by JSON
// path ("recipe.vllm.source.url"); nil when it is valid. Messages never
// quote the values.
func ValidateRecipe(rc fleetapi.Recipe) map[string]string {
	fe := map[string]string{}
	add := func(field, format string, args ...any) {
		if _, ok := fe[field]; !ok {
			fe[field] = fmt.Sprintf(format, args...)
		}
	}
	r := rc.VLLM
	if r == nil {
		add("recipe.vllm", "is required")
		return fe
	}
	if r.Model == "" || len(r.Model) > 256 || strings.IndexFunc(r.Model, badRune) >= 0 {
		add("recipe.vllm.model", "is required (1-256 characters, no whitespace)")
	}
	validateSource(r.Source, add)
	if !(r.VRAMGB > 0 && r.VRAMGB < 1e5) {
		add("recipe.vllm.vram_gb", "is required: the model's VRAM need in GB, above 0")
	}
	if !(r.DiskGB > 0 && r.DiskGB < 1e6) {
		add("recipe.vllm.disk_gb", "is required: the weights' disk need in GB, above 0")
	}
	validateArgs(r.Args, add)
	switch r.KVCache {
	case "":
	case fleetapi.KVCacheAuto:
		if _, ok := fleetapi.FlagValue(r.Args, "--kv-cache-memory"); ok {
			add("recipe.vllm.kv_cache", "auto calibrates --kv-cache-memory: remove that flag from args, or kv_cache")
		}
	default:
		add("recipe.vllm.kv_cache", "must be auto or absent")
	}
	if len(fe) == 0 {
		return nil
	}
	return fe
}

func badRune(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }

func validateSource(s fleetapi.Source, add func(field, format string, args ...any)) {
	const f = "recipe.vllm.source"
	// Each kind takes its own fields; a field of another kind is a mistake
	// the operator should hear about rather than have ignored.
	given := map[string]string{"repo": s.Repo, "revision": s.Revision, "url": s.URL, "ref": s.Ref, "path": s.Path}
	allowed := map[string][]string{
		fleetapi.SourceHF:       {"repo", "revision"},
		fleetapi.SourceURL:      {"url"},
		fleetapi.SourceRegistry: {"ref"},
		fleetapi.SourceLocal:    {"path"},
	}
	fields, ok := allowed[s.Kind]
	if !ok {
		add(f+".kind", "must be one of hf, url, registry, local")
		return
	}
	for name, v := range given {
		if v != "" && !slices.Contains(fields, name) {
			add(f+"."+name, "does not apply to source kind %s", s.Kind)
		}
		if strings.IndexFunc(v, badRune) >= 0 || len(v) > 2048 {
			add(f+"."+name, "must be at most 2048 characters without whitespace")
		}
	}
	switch s.Kind {
	case fleetapi.SourceURL:
		u, err := url.Parse(s.URL)
		if s.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add(f+".url", "is required: an http or https URL")
		}
	case fleetapi.SourceRegistry:
		if s.Ref == "" {
			add(f+".ref", "is required: the artifact reference in your registry")
		}
	case fleetapi.SourceLocal:
		if s.Path == "" || !path.IsAbs(s.Path) {
			add(f+".path", "is required: an absolute directory on the box")
		}
	}
}

func validateArgs(args []string, add func(field, format string, args ...any)) {
	const f = "recipe.vllm.args"
	if len(args) > 200 {
		add(f, "holds at most 200 items")
		return
	}
	for i, a := range args {
		field := fmt.Sprintf("%s[%d]", f, i)
		if a == "" || len(a) > 4096 || strings.IndexFunc(a, unicode.IsControl) >= 0 {
			add(field, "must be 1-4096 characters without control characters")
			continue
		}
		if i == 0 && !strings.HasPrefix(a, "-") {
			add(field, "must be a flag (start with --); vLLM's model comes from recipe.vllm.model")
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		name = fleetapi.FlagName(name)
		if why, ok := reservedFlags[name]; ok {
			add(field, "%s is set by the fleet from %s", name, why)
		}
	}
	if v, ok := fleetapi.FlagValue(args, "--max-model-len"); ok {
		if n, err := strconv.Atoi(v); err != nil || n <= 0 {
			add(f, "--max-model-len must be a positive integer")
		}
	}
	if v, ok := fleetapi.FlagValue(args, "--served-model-name"); ok && v == "" {
		add(f, "--served-model-name needs a value")
	}
}

// AssignmentOf is the assignment a box receives for h, revision included.
//
// A restart of a routed host waits for its drain: Apply and AutoApply go
// out false until the drain is over (RestartHeld), so an agent that does
// not know the drain field cannot restart early either.
func AssignmentOf(h *store.Host) fleetapi.Assignment {
	a := fleetapi.Assignment{
		HostID: h.ID, ModelName: h.ModelName, Port: h.Port, APIKey: h.APIKey.Reveal(), HFToken: hfToken(h), Recipe: h.Recipe,
	}
	a.Revision = fleetapi.Revision(a)
	held := restartHeld(h, a.Revision)
	a.Apply = h.ApplyRequested && !held
	a.AutoApply = h.AutoApply && !held
	if d := h.Drain; d != nil {
		a.Drain = &fleetapi.Drain{State: fleetapi.DrainDraining, Deadline: d.Deadline}
		if d.DrainedAt != nil {
			a.Drain.State = fleetapi.DrainDrained
		}
	}
	return a
}

// Revision is the current revision of h's assignment.
func Revision(h *store.Host) string {
	return fleetapi.Revision(fleetapi.Assignment{HostID: h.ID, ModelName: h.ModelName, Port: h.Port, APIKey: h.APIKey.Reveal(),
		HFToken: hfToken(h), Recipe: h.Recipe})
}

// hfToken is the token h's box receives: h's hf token when its recipe's
// source is hf, else none.
func hfToken(h *store.Host) string {
	if h.Recipe.VLLM == nil || (h.Recipe.VLLM.Source.Kind != fleetapi.SourceHF && h.Recipe.VLLM.Source.Kind != "") {
		return ""
	}
	return h.HFToken.Reveal()
}

// RestartHeld reports whether a restart of h's box onto the current
// revision must wait for a drain: the host is routed (serving), the box
// runs another revision, and no drain has finished yet. A host that is not
// routed restarts at once: nothing of it is in flight.
func RestartHeld(h *store.Host) bool { return restartHeld(h, Revision(h)) }

func restartHeld(h *store.Host, rev string) bool {
	if h.State != store.HostServing || h.AppliedRevision == rev {
		return false
	}
	return h.Drain == nil || h.Drain.DrainedAt == nil
}
