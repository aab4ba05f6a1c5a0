// Package config is rolter's YAML file of resources (`--config`, `rolter
// import`, `rolter apply` and `rolter export`): orgs with their providers,
// provider groups and fleet hosts, and projects with their routes and
// virtual keys.
//
// Parsing is strict: an unknown key is an error naming its line. Provider
// key secrets are references to environment variables (secret_env,
// os.environ/NAME or ${NAME}), resolved by Parse. Applying (Apply, for
// --config and import) creates what is missing and never overwrites: a
// resource that already exists (same org or project name, provider or
// group slug, route model, or live virtual key name) is left exactly as it
// is, and reported. rolter apply sends the same file, as Desired, to the
// gateway, whose admin service reconciles it (admin.Service.Apply); Export
// writes the gateway's state back in this format.
//
// The file has its own types (format.go), with the admin API's field names;
// they map onto the inputs of the admin service, which validates.
package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/secret"
)

// Load reads and strictly parses path. Provider key secrets given as
// secret_env are resolved from the environment here.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	f, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return f, nil
}

// Parse strictly decodes a config document; every referenced environment
// variable must be set.
func Parse(b []byte) (*File, error) {
	f, _, err := ParseWith(b, ParseOptions{})
	return f, err
}

// ParseOptions say how ParseWith resolves a provider key's environment
// reference.
type ParseOptions struct {
	// Lookup reads a variable; nil is os.LookupEnv.
	Lookup func(string) (string, bool)
	// AllowUnset leaves a key whose variable is unset (or empty) without
	// its secret and reports it, for a plan that needs no secrets (apply
	// --dry-run); otherwise it is an error naming the key.
	AllowUnset bool
}

// Unset is a provider key whose environment variable is not set.
type Unset struct {
	Entry string // "orgs[0].providers[1].keys[0]"
	Name  string // the variable
}

// ParseWith strictly decodes a config document. A key's secret written
// as "os.environ/NAME" or "${NAME}" becomes SecretEnv NAME; every SecretEnv
// is read with opt.Lookup. Unset lists, in file order, the keys left
// without a secret (AllowUnset only).
func ParseWith(b []byte, opt ParseOptions) (*File, []Unset, error) {
	if opt.Lookup == nil {
		opt.Lookup = os.LookupEnv
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return &f, nil, nil // an empty file imports nothing
		}
		return nil, nil, cleanYAMLError(err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, nil, errors.New("only one YAML document is allowed")
	}
	var unset []Unset
	for oi := range f.Orgs {
		for pi := range f.Orgs[oi].Providers {
			p := &f.Orgs[oi].Providers[pi]
			for ki := range p.Keys {
				k := &p.Keys[ki]
				where := fmt.Sprintf("orgs[%d].providers[%d].keys[%d]", oi, pi, ki)
				name, isRef, err := envRef(k.Secret.Reveal())
				switch {
				case err != nil:
					return nil, nil, fmt.Errorf("%s: secret: %w", where, err)
				case k.SecretEnv != "" && !k.Secret.IsZero():
					return nil, nil, fmt.Errorf("%s: give secret or secret_env, not both", where)
				case isRef:
					k.SecretEnv, k.Secret = name, secret.Secret{}
				}
				if k.SecretEnv == "" {
					continue
				}
				v, ok := opt.Lookup(k.SecretEnv)
				switch {
				case ok && v != "":
					k.Secret = secret.New(v)
				case opt.AllowUnset:
					unset = append(unset, Unset{Entry: where, Name: k.SecretEnv})
				default:
					return nil, nil, fmt.Errorf("%s: environment variable %s (secret_env) is not set", where, k.SecretEnv)
				}
			}
		}
	}
	for oi := range f.Orgs {
		for hi := range f.Orgs[oi].Hosts {
			h := &f.Orgs[oi].Hosts[hi]
			where := fmt.Sprintf("orgs[%d].hosts[%d].hf_token", oi, hi)
			name, isRef, err := envRef(h.HFToken.Reveal())
			switch {
			case err != nil:
				return nil, nil, fmt.Errorf("%s: %w", where, err)
			case !isRef:
				continue
			}
			v, ok := opt.Lookup(name)
			switch {
			case ok && v != "":
				h.HFToken = secret.New(v)
			case opt.AllowUnset:
				h.HFToken = secret.Secret{}
				unset = append(unset, Unset{Entry: where, Name: name})
			default:
				return nil, nil, fmt.Errorf("%s: environment variable %s is not set", where, name)
			}
		}
	}
	return &f, unset, nil
}

// envNamePattern is what an environment reference may name.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// envRef reads a secret written as a reference to an environment variable:
// "os.environ/NAME" or "${NAME}". isRef is false for a literal secret. The
// error never quotes the value: it may be a secret after all.
func envRef(v string) (name string, isRef bool, err error) {
	switch {
	case strings.HasPrefix(v, "os.environ/"):
		name = strings.TrimPrefix(v, "os.environ/")
	case strings.HasPrefix(v, "${"):
		var ok bool
		if name, ok = strings.CutSuffix(strings.TrimPrefix(v, "${"), "}"); !ok {
			return "", false, errors.New("a reference ${NAME} lacks its closing brace")
		}
	default:
		return "", false, nil
	}
	if !envNamePattern.MatchString(name) {
		return "", false, errors.New("a reference must name an environment variable: letters, digits and '_', not starting with a digit")
	}
	return name, true, nil
}

// cleanYAMLError turns yaml's "field x not found in type config.Provider"
// into "unknown key x" while keeping the line numbers.
func cleanYAMLError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, m := range te.Errors {
		if i := strings.Index(m, " not found in type "); i >= 0 {
			m = strings.Replace(m[:i], "field ", "unknown key ", 1)
		}
		msgs = append(msgs, m)
	}
	return errors.New(strings.Join(msgs, "; "))
}

// Desired is the file as the admin service's desired state (rolter
// apply's request), secrets included.
func (f *File) Desired() admin.Desired {
	d := admin.Desired{Orgs: []admin.DesiredOrg{}}
	for _, o := range f.Orgs {
		d.Orgs = append(d.Orgs, o.desired())
	}
	return d
}

// Apply creates every resource of f that does not exist yet, in dependency
// order (org, providers, groups, projects, routes, keys, hosts), through
// the admin service's Apply with CreateOnly, the code rolter apply runs.
// Providers and groups that name no slug get their derived one,
// backfilled as every import path does (design 000: the first claimant
// keeps it bare, later ones get -2, -3, ..., each logged as "config: slug
// backfilled"); an explicit slug that collides is an error naming the
// entry.
// Secrets of created virtual keys (and hosts' API keys) are printed once to
// out. It stops at the first invalid resource; the resources created before
// it stay, and a re-run skips them.
func Apply(ctx context.Context, svc *admin.Service, f *File, out io.Writer, log *slog.Logger) error {
	res, err := svc.Apply(ctx, f.Desired(), admin.ApplyOptions{CreateOnly: true})
	names := f.entryNames()
	for _, c := range res.Changes {
		e := names[c.Entry]
		if c.SlugBase != "" {
			log.Info("config: slug backfilled", "kind", e.kind, "entry", c.Entry, "name", e.name, "base_slug", c.SlugBase, "slug", c.Name)
		}
		switch {
		case c.Action == admin.ActionUnchanged:
			log.Info("config: exists, left unchanged", "kind", e.kind, "name", e.name)
		case c.Action == admin.ActionCreate && c.Kind == admin.KindVirtualKey:
			fmt.Fprintf(out, "rolter: config created virtual key %q in %s: %s (shown once)\n", e.key, e.parent, c.Secret)
		case c.Action == admin.ActionCreate && c.Kind == admin.KindHost:
			fmt.Fprintf(out, "rolter: config created host %s: API key %s (shown once)\n", e.name, c.Secret)
		}
	}
	if err != nil {
		var ae *admin.ApplyError
		if errors.As(err, &ae) {
			return wrap(ae.Entry, ae.Err)
		}
		return wrap("orgs", err)
	}
	return nil
}

// entryName is how Apply's messages name an entry of the file.
type entryName struct {
	kind, name string
	// parent ("org/project") and key: a virtual key's.
	parent, key string
}

// entryNames names every entry of f by its path, as the importer always
// named them: providers and groups by slug, else by name.
func (f *File) entryNames() map[string]entryName {
	m := map[string]entryName{}
	for oi, o := range f.Orgs {
		w := fmt.Sprintf("orgs[%d]", oi)
		m[w] = entryName{kind: "org", name: o.Name}
		for i, p := range o.Providers {
			m[fmt.Sprintf("%s.providers[%d]", w, i)] = entryName{kind: "provider", name: o.Name + "/" + firstNonEmpty(p.Slug, p.Name)}
		}
		for i, g := range o.Groups {
			m[fmt.Sprintf("%s.groups[%d]", w, i)] = entryName{kind: "group", name: o.Name + "/" + firstNonEmpty(g.Slug, g.Name)}
		}
		for i, p := range o.Projects {
			pw, pname := fmt.Sprintf("%s.projects[%d]", w, i), o.Name+"/"+p.Name
			m[pw] = entryName{kind: "project", name: pname}
			for j, r := range p.Routes {
				m[fmt.Sprintf("%s.routes[%d]", pw, j)] = entryName{kind: "route", name: pname + "/" + r.Model}
			}
			for j, k := range p.Keys {
				m[fmt.Sprintf("%s.keys[%d]", pw, j)] = entryName{kind: "virtual key", name: pname + "/" + k.Name, parent: pname, key: k.Name}
			}
		}
		for i, h := range o.Hosts {
			m[fmt.Sprintf("%s.hosts[%d]", w, i)] = entryName{kind: "host", name: fmt.Sprintf("%s/%s:%d", o.Name, h.IP, h.Port)}
		}
	}
	return m
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// wrap prefixes the path of the failing resource, with field messages in
// field order so that the same mistake always reads the same.
func wrap(where string, err error) error {
	var ae *admin.Error
	if errors.As(err, &ae) {
		msg := ae.Message
		for _, f := range slices.Sorted(maps.Keys(ae.Fields)) {
			msg += fmt.Sprintf("; %s %s", f, ae.Fields[f])
		}
		return fmt.Errorf("config: %s: %s (%s)", where, msg, ae.Code)
	}
	return fmt.Errorf("config: %s: %w", where, err)
}
