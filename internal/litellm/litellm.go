// Package litellm imports a LiteLLM proxy config.yaml into rolter
// (`rolter import`, SPEC §1).
//
// Only model_list is imported. Each entry (a LiteLLM "deployment") becomes
// a route target: one rolter provider per distinct (kind, api_base,
// api_key), one route per distinct model_name. Everything else a LiteLLM
// file carries (litellm_settings, router_settings, rpm/tpm, timeouts, ...)
// has no rolter equivalent yet and is ignored with a warning, unlike
// rolter's own config format, whose parser is strict: LiteLLM configs are
// written for another product, and refusing them for a key rolter does not
// use would make the importer useless.
//
// Import is all or nothing for bad input: every entry is checked before
// anything is written. New providers get slugs from the deterministic bulk
// backfill of design 000 (see Backfill); re-running the same file creates
// nothing.
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
	// ModelName is the public model name: the rolter route.
	ModelName string
	// Kind is the rolter provider kind from the litellm_params.model prefix.
	Kind string
	// BaseURL is api_base (or the kind's public default) without a trailing
	// slash.
	BaseURL string
	// Key is api_key, resolved from the environment for "os.environ/NAME";
	// zero when the entry has none.
	Key secret.Secret
	// UpstreamModel is litellm_params.model after the provider prefix.
	UpstreamModel string
	// Weight is litellm_params.weight (default 1).
	Weight int
}

// Config is a parsed LiteLLM config.
type Config struct {
	Entries []Entry
	// Warnings name every key the import ignores, one line each, sorted.
	// They carry key names and entry positions only, never values.
	Warnings []string
}

// The keys of a model_list entry the importer reads; anything else is
// reported and ignored.
type rawFile struct {
	ModelList *[]rawEntry    `yaml:"model_list"`
	Other     map[string]any `yaml:",inline"`
}

type rawEntry struct {
	ModelName string         `yaml:"model_name"`
	Params    *rawParams     `yaml:"litellm_params"`
	Other     map[string]any `yaml:",inline"`
}

type rawParams struct {
	Model   string         `yaml:"model"`
	APIBase string         `yaml:"api_base"`
	APIKey  secret.Secret  `yaml:"api_key"`
	Weight  *float64       `yaml:"weight"`
	Other   map[string]any `yaml:",inline"`
}

// envPrefix marks a LiteLLM value read from the environment.
const envPrefix = "os.environ/"

// why explains the ignored keys users most often ask about.
var why = map[string]string{
	"litellm_params.rpm": "rolter does not import rate limits; set them on virtual keys",
	"litellm_params.tpm": "rolter does not import rate limits; set them on virtual keys",
}

// Parse decodes a LiteLLM config and checks every model_list entry.
// lookupEnv resolves "os.environ/NAME" values (os.LookupEnv in the CLI).
// All entry problems are returned together, each naming its entry.
func Parse(b []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
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
	cfg := &Config{}
	for _, k := range slices.Sorted(maps.Keys(raw.Other)) {
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("ignored top-level key %s: no rolter equivalent", k))
	}
	ignored := map[string][]int{} // key path -> entries
	var errs []error
	for i, re := range *raw.ModelList {
		for k := range re.Other {
			ignored[k] = append(ignored[k], i)
		}
		if re.Params != nil {
			for k := range re.Params.Other {
				ignored["litellm_params."+k] = append(ignored["litellm_params."+k], i)
			}
		}
		e, err := checkEntry(i, re, lookupEnv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cfg.Entries = append(cfg.Entries, e)
	}
	for _, k := range slices.Sorted(maps.Keys(ignored)) {
		where := make([]string, 0, len(ignored[k]))
		for _, i := range ignored[k] {
			where = append(where, fmt.Sprintf("model_list[%d]", i))
		}
		w := fmt.Sprintf("ignored %s in %s", k, strings.Join(where, ", "))
		if r, ok := why[k]; ok {
			w += " (" + r + ")"
		}
		cfg.Warnings = append(cfg.Warnings, w)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// checkEntry maps one entry. The checks repeat the admin API's rules for
// the fields the import writes, so that a bad entry is refused before
// anything is written rather than halfway through.
func checkEntry(i int, re rawEntry, lookupEnv func(string) (string, bool)) (Entry, error) {
	e := Entry{Index: i, ModelName: re.ModelName, Weight: 1}
	var probs []string
	fail := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	if msg := checkModelName(re.ModelName); msg != "" {
		fail("model_name %s", msg)
	}
	p := re.Params
	if p == nil {
		fail("litellm_params is required")
		return e, entryError(i, re.ModelName, probs)
	}
	kind, upstream, err := SplitModel(p.Model)
	if err != nil {
		fail("litellm_params.model: %v", err)
	} else {
		e.Kind, e.UpstreamModel = kind, upstream
		if msg := checkModelName(upstream); msg != "" {
			fail("litellm_params.model: the upstream model after the provider prefix %s", msg)
		}
	}
	apiBase, err := resolveEnv(p.APIBase, lookupEnv)
	if err != nil {
		fail("litellm_params.api_base: %v", err)
	} else if kind != "" {
		if e.BaseURL, err = BaseURL(kind, apiBase); err != nil {
			fail("litellm_params.api_base: %v", err)
		}
	}
	key, err := resolveEnv(p.APIKey.Reveal(), lookupEnv)
	if err != nil {
		fail("litellm_params.api_key: %v", err)
	}
	e.Key = secret.New(key)
	if w := p.Weight; w != nil {
		if *w != math.Trunc(*w) || *w < 0 || *w > admin.MaxWeight {
			fail("litellm_params.weight must be a whole number from 0 to %d", admin.MaxWeight)
		} else {
			e.Weight = int(*w)
		}
	}
	if len(probs) > 0 {
		return e, entryError(i, re.ModelName, probs)
	}
	return e, nil
}

func entryError(i int, modelName string, probs []string) error {
	where := fmt.Sprintf("model_list[%d]", i)
	if modelName != "" && len(modelName) <= 80 {
		where += fmt.Sprintf(" (model_name %q)", modelName)
	}
	return fmt.Errorf("%s: %s", where, strings.Join(probs, "; "))
}

// resolveEnv reads "os.environ/NAME" from the environment; other values
// pass through. The error names the variable, never a value.
func resolveEnv(v string, lookupEnv func(string) (string, bool)) (string, error) {
	name, ok := strings.CutPrefix(v, envPrefix)
	if !ok {
		return v, nil
	}
	if name == "" {
		return "", errors.New(envPrefix + " names no environment variable")
	}
	val, ok := lookupEnv(name)
	if !ok || val == "" {
		return "", fmt.Errorf("environment variable %s is not set", name)
	}
	return val, nil
}

// checkModelName is the admin API's rule for route and upstream model
// names; "" means valid.
func checkModelName(m string) string { return admin.ModelNameProblem(m) }

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
