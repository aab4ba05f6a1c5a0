// Package litellm imports a LiteLLM proxy config.yaml into rolter
// (`rolter import`, SPEC §1; docs/import.md).
//
// Only model_list is imported. Each entry (a LiteLLM "deployment") becomes
// a route target: one rolter provider per distinct (kind, api_base,
// api_key), one route per distinct model_name. A wildcard entry
// ("prefix/*") becomes a provider group with that slug, so that clients
// keep asking for "prefix/<model>" (see wildcard.go). rpm and tpm become
// route limits where every deployment of the route sets them (limits.go).
//
// The importer is forgiving, because LiteLLM configs are written for
// another product: an entry rolter cannot serve (an azure/ deployment, an
// unknown provider prefix, a LiteLLM model pattern) is skipped and listed
// in the report, and every setting that has no rolter equivalent is named
// in a warning of its own (settings.go). An entry that is broken, though
// (no model, a bad api_base, a vLLM without an address) stops the import
// before anything is written, each problem naming its entry.
//
// A re-run finds the providers it created by an import identity recorded
// on them (identity.go), not by their base_url or key, so an edited
// base_url or a rotated key updates the provider instead of duplicating
// it. New providers get slugs from the deterministic bulk backfill of
// design 000 (see Backfill).
package litellm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/secret"
)

// Entry is one model_list entry, checked and mapped to rolter terms.
type Entry struct {
	// Index is the position in model_list; messages name it as
	// model_list[Index].
	Index int
	// ModelName is the public model name: the rolter route, or for a
	// wildcard entry the pattern ("openai/*" or "*").
	ModelName string
	// Model is litellm_params.model as the file writes it (with
	// custom_llm_provider put in front when it sets the provider).
	Model string
	// Kind is the rolter provider kind from the litellm_params.model prefix.
	Kind string
	// Label names the provider's kind in its display name: the kind, or
	// the LiteLLM prefix where that says more ("ollama").
	Label string
	// BaseURL is api_base (or the prefix's default) without a trailing
	// slash; "" when it comes from an unset variable (dry run).
	BaseURL string
	// BaseRef names the environment variable api_base is read from ("" for
	// a literal); BaseUnset: it is not set (dry run only).
	BaseRef   string
	BaseUnset bool
	// Key is api_key, resolved from the environment for "os.environ/NAME";
	// zero when the entry has none, or the variable is unset (dry run).
	Key secret.Secret
	// KeyRef names the environment variable api_key is read from ("" for a
	// literal key or none); KeyUnset: it is not set (dry run only).
	KeyRef   string
	KeyUnset bool
	// UpstreamModel is litellm_params.model after the provider prefix; ""
	// for a wildcard entry, which passes the requested model through.
	UpstreamModel string
	// Weight is litellm_params.weight (default 1).
	Weight int
	// Priority is litellm_params.order (lower first, as a target's
	// priority; default 0).
	Priority int
	// RPM and TPM are litellm_params.rpm and tpm; 0: not set.
	RPM, TPM int
	// Wildcard is set for a wildcard entry: the prefix of "prefix/*", or
	// "*" for the catch-all. Such an entry makes no route.
	Wildcard string
	// InfoID is model_info.id, LiteLLM's own deployment id; "" if none.
	// Occurrence counts the entries before this one, this one included,
	// with the same ModelName and Model. Either makes the import identity.
	InfoID     string
	Occurrence int
}

// Config is a parsed LiteLLM config.
type Config struct {
	Entries []Entry
	// Skipped are the entries rolter cannot import, in file order.
	Skipped []Skipped
	// Unset are the environment variables the imported entries read that
	// are not set, sorted by name; only ParseDryRun leaves any.
	Unset []UnsetVar
	// Limits are the route limits mapped from rpm and tpm, by model_name.
	Limits map[string]Limits
	// Fallbacks and ContextFallbacks are the fallback settings
	// (router_settings or litellm_settings fallbacks and
	// context_window_fallbacks), by model_name; FallbackWarnings say what
	// of them cannot be mapped.
	Fallbacks        map[string][]string
	ContextFallbacks map[string]string
	FallbackWarnings []string
	// Warnings name every setting the import does not carry over, one line
	// each, sorted. They carry key names, entry positions and model names
	// only, never values.
	Warnings []string
}

// Skipped is an entry the import leaves out, and why.
type Skipped struct {
	Index     int
	ModelName string
	Reason    string
}

// UnsetVar is an environment variable the file references that is not
// set, with the fields that read it ("model_list[0].litellm_params.api_key").
type UnsetVar struct {
	Name   string
	Fields []string
}

// The keys the importer reads; anything else is reported and ignored.
type rawFile struct {
	ModelList *[]rawEntry `yaml:"model_list"`
	// EnvVars are set into the environment by LiteLLM at start, so
	// os.environ/ references may name them (they win over the process
	// environment, as in LiteLLM).
	EnvVars map[string]any `yaml:"environment_variables"`
	Other   map[string]any `yaml:",inline"`
}

type rawEntry struct {
	ModelName string         `yaml:"model_name"`
	Params    *rawParams     `yaml:"litellm_params"`
	Info      map[string]any `yaml:"model_info"`
	Other     map[string]any `yaml:",inline"`
}

type rawParams struct {
	Model    string         `yaml:"model"`
	Provider string         `yaml:"custom_llm_provider"`
	APIBase  string         `yaml:"api_base"`
	APIKey   secret.Secret  `yaml:"api_key"`
	Weight   *float64       `yaml:"weight"`
	Order    *float64       `yaml:"order"`
	RPM      *float64       `yaml:"rpm"`
	TPM      *float64       `yaml:"tpm"`
	Other    map[string]any `yaml:",inline"`
}

// envPrefix marks a LiteLLM value read from the environment.
const envPrefix = "os.environ/"

// Parse decodes a LiteLLM config and checks every model_list entry.
// lookupEnv resolves "os.environ/NAME" values (os.LookupEnv in the CLI);
// an unset variable is an error of the entry that reads it. Entries rolter
// cannot serve are left out and listed in Config.Skipped; broken entries
// are errors, returned together, each naming its entry.
func Parse(b []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	return parse(b, lookupEnv, false)
}

// ParseDryRun is Parse for a plan that writes nothing: an unset variable
// is listed in Config.Unset instead, and its entry is planned without the
// value (its key unknown, or its api_base).
func ParseDryRun(b []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	return parse(b, lookupEnv, true)
}

func parse(b []byte, lookupEnv func(string) (string, bool), dryRun bool) (*Config, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var raw rawFile
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("litellm: the file is empty; a LiteLLM config needs model_list")
		}
		return nil, fmt.Errorf("litellm: %w", err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("litellm: only one YAML document is allowed")
	}
	if raw.ModelList == nil {
		return nil, errors.New("litellm: no model_list: not a LiteLLM config")
	}
	env := fileEnv(raw.EnvVars, lookupEnv)
	fallbacks, ctxFallbacks, fbWarns := takeFallbacks(raw.Other)
	cfg := &Config{Warnings: settingWarnings(raw.Other), Fallbacks: fallbacks, ContextFallbacks: ctxFallbacks, FallbackWarnings: fbWarns}
	ignored := map[string][]int{} // key path -> entries
	unset := map[string][]string{}
	seen := map[[2]string]int{} // (model_name, model) -> entries so far
	var errs []error
	for i, re := range *raw.ModelList {
		c := entryCheck{index: i, env: env, dryRun: dryRun}
		e, skip := c.check(re)
		if skip != "" {
			cfg.Skipped = append(cfg.Skipped, Skipped{Index: i, ModelName: re.ModelName, Reason: skip})
			continue
		}
		if len(c.probs) > 0 {
			errs = append(errs, entryError(i, re.ModelName, c.probs))
			continue
		}
		for _, k := range entryKeys(re) {
			ignored[k] = append(ignored[k], i)
		}
		for name, fields := range c.unset {
			unset[name] = append(unset[name], fields...)
		}
		key := [2]string{e.ModelName, e.Model}
		seen[key]++
		e.Occurrence = seen[key]
		cfg.Entries = append(cfg.Entries, e)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, name := range slices.Sorted(maps.Keys(unset)) {
		cfg.Unset = append(cfg.Unset, UnsetVar{Name: name, Fields: unset[name]})
	}
	var limitWarnings []string
	cfg.Limits, limitWarnings = routeLimits(cfg.Entries)
	var entryWarnings []string
	for _, k := range slices.Sorted(maps.Keys(ignored)) {
		entryWarnings = append(entryWarnings, fmt.Sprintf("ignored %s in %s", k, entries(ignored[k]))+because(k))
	}
	entryWarnings = append(entryWarnings, limitWarnings...)
	slices.Sort(entryWarnings)
	cfg.Warnings = append(cfg.Warnings, entryWarnings...)
	return cfg, nil
}

// entryKeys are the keys of an entry the import does not read, as paths
// ("litellm_params.timeout", "model_info.mode").
func entryKeys(re rawEntry) []string {
	var out []string
	for k := range re.Other {
		out = append(out, k)
	}
	if re.Params != nil {
		for k := range re.Params.Other {
			out = append(out, "litellm_params."+k)
		}
	}
	for k := range re.Info {
		if k != "id" {
			out = append(out, "model_info."+k)
		}
	}
	return out
}

// entryCheck maps one entry, collecting its problems and the unset
// variables it reads.
type entryCheck struct {
	index  int
	env    func(string) (string, bool)
	dryRun bool
	probs  []string
	unset  map[string][]string
}

func (c *entryCheck) fail(format string, args ...any) {
	c.probs = append(c.probs, fmt.Sprintf(format, args...))
}

// check maps one entry. It returns a reason when rolter cannot serve the
// entry at all (it is skipped, whatever else is wrong with it); otherwise
// the problems it finds are in c.probs. The checks repeat the admin API's
// rules for the fields the import writes, so that a bad entry is refused
// before anything is written rather than halfway through.
func (c *entryCheck) check(re rawEntry) (e Entry, skip string) {
	e = Entry{Index: c.index, ModelName: re.ModelName, Weight: 1}
	p := re.Params
	if p == nil {
		if msg := admin.ModelNameProblem(re.ModelName); msg != "" {
			c.fail("model_name %s", msg)
		}
		c.fail("litellm_params is required")
		return e, ""
	}
	e.Model = p.Model
	if p.Provider != "" && !strings.HasPrefix(p.Model, p.Provider+"/") {
		e.Model = p.Provider + "/" + p.Model
	}
	pfx, upstream, err := splitModel(e.Model)
	var unsupported *UnsupportedError
	switch {
	case errors.As(err, &unsupported):
		return e, unsupported.Reason
	case err != nil:
		if msg := admin.ModelNameProblem(re.ModelName); msg != "" {
			c.fail("model_name %s", msg)
		}
		c.fail("litellm_params.model: %v", err)
		return e, ""
	}
	if why := wildcard(&e, upstream); why != "" {
		return e, why
	}
	e.Kind, e.Label = pfx.kind, pfx.label()
	if e.Wildcard == "" {
		if msg := admin.ModelNameProblem(re.ModelName); msg != "" {
			c.fail("model_name %s", msg)
		}
		e.UpstreamModel = upstream
		if msg := admin.ModelNameProblem(upstream); msg != "" {
			c.fail("litellm_params.model: the upstream model after the provider prefix %s", msg)
		}
	}
	apiBase, ref, ok := c.resolve("api_base", p.APIBase)
	e.BaseRef, e.BaseUnset = ref, !ok
	if ok {
		if e.BaseURL, err = pfx.baseURL(apiBase); err != nil {
			c.fail("litellm_params.api_base: %v", err)
		}
	}
	key, ref, ok := c.resolve("api_key", p.APIKey.Reveal())
	e.Key, e.KeyRef, e.KeyUnset = secret.New(key), ref, !ok
	e.Weight = c.whole("weight", p.Weight, 0, admin.MaxWeight, 1)
	e.Priority = c.whole("order", p.Order, 0, admin.MaxPriority, 0)
	e.RPM = c.whole("rpm", p.RPM, 1, admin.MaxRateLimit, 0)
	e.TPM = c.whole("tpm", p.TPM, 1, admin.MaxRateLimit, 0)
	e.InfoID = infoID(re.Info)
	return e, ""
}

// whole reads a whole-number parameter from lo to hi; def when absent.
func (c *entryCheck) whole(name string, v *float64, lo, hi, def int) int {
	if v == nil {
		return def
	}
	if *v != math.Trunc(*v) || *v < float64(lo) || *v > float64(hi) {
		c.fail("litellm_params.%s must be a whole number from %d to %d", name, lo, hi)
		return def
	}
	return int(*v)
}

// resolve reads "os.environ/NAME" from the environment; other values pass
// through. ref is NAME ("" for a literal). ok is false only in a dry run,
// for an unset variable, which is recorded; otherwise an unset variable
// is a problem of the entry. Messages name the variable, never a value.
func (c *entryCheck) resolve(field, v string) (val, ref string, ok bool) {
	name, isRef := strings.CutPrefix(v, envPrefix)
	if !isRef {
		return v, "", true
	}
	if name == "" {
		c.fail("litellm_params.%s: %s names no environment variable", field, envPrefix)
		return "", "", true
	}
	if val, set := c.env(name); set && val != "" {
		return val, name, true
	}
	if !c.dryRun {
		c.fail("litellm_params.%s: environment variable %s is not set", field, name)
		return "", name, true
	}
	if c.unset == nil {
		c.unset = map[string][]string{}
	}
	c.unset[name] = append(c.unset[name], fmt.Sprintf("model_list[%d].litellm_params.%s", c.index, field))
	return "", name, false
}

// fileEnv resolves a variable from the file's environment_variables first
// (LiteLLM sets them into its environment at start), then from lookupEnv.
func fileEnv(vars map[string]any, lookupEnv func(string) (string, bool)) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if v, ok := vars[name]; ok && v != nil {
			if s := scalar(v); s != "" {
				return s, true
			}
		}
		return lookupEnv(name)
	}
}

// scalar is a YAML scalar as text; "" for anything else.
func scalar(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

// infoID is model_info.id, a string or a number in YAML.
func infoID(info map[string]any) string {
	if v, ok := info["id"]; ok {
		return scalar(v)
	}
	return ""
}

func entryError(i int, modelName string, probs []string) error {
	where := fmt.Sprintf("model_list[%d]", i)
	if modelName != "" && len(modelName) <= 80 {
		where += fmt.Sprintf(" (model_name %q)", modelName)
	}
	return fmt.Errorf("%s: %s", where, strings.Join(probs, "; "))
}

// checkURL is the admin API's base_url rule, link-local and metadata
// addresses refused (as by a default rolter serve). Errors never quote the
// URL: it may carry credentials.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return errors.New("must be an absolute http:// or https:// URL, e.g. http://10.0.0.5:8000/v1")
	case u.User != nil:
		return errors.New("must not carry credentials; put the key in api_key")
	case u.RawQuery != "" || u.Fragment != "":
		return errors.New("must not have a query or fragment")
	}
	// The admin API's address policy, checked here so that a refused host
	// stops the import before anything is written.
	if why := admin.UpstreamHostProblem(u.Hostname(), false); why != "" {
		return errors.New("host " + why)
	}
	return nil
}
