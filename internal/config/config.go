// Package config imports a YAML file of rolter resources (`--config`,
// `rolter import`): orgs with their providers and provider groups, and
// projects with their routes and virtual keys.
//
// Parsing is strict: an unknown key is an error naming its line. Applying
// creates what is missing and never overwrites: a resource that already
// exists (same org or project name, provider or group slug, route model, or
// live virtual key name) is left exactly as it is, and reported.
//
// The file has its own types (format.go), with the admin API's field names;
// Apply maps them onto the inputs of the admin service, which validates.
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

// Parse strictly decodes a config document.
func Parse(b []byte) (*File, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return &f, nil // an empty file imports nothing
		}
		return nil, cleanYAMLError(err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("only one YAML document is allowed")
	}
	for oi := range f.Orgs {
		for pi := range f.Orgs[oi].Providers {
			p := &f.Orgs[oi].Providers[pi]
			for ki := range p.Keys {
				k := &p.Keys[ki]
				where := fmt.Sprintf("orgs[%d].providers[%d].keys[%d]", oi, pi, ki)
				switch {
				case k.SecretEnv != "" && !k.Secret.IsZero():
					return nil, fmt.Errorf("%s: give secret or secret_env, not both", where)
				case k.SecretEnv != "":
					v, ok := os.LookupEnv(k.SecretEnv)
					if !ok || v == "" {
						return nil, fmt.Errorf("%s: environment variable %s (secret_env) is not set", where, k.SecretEnv)
					}
					k.Secret = secret.New(v)
				}
			}
		}
	}
	return &f, nil
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

// Apply creates every resource of f that does not exist yet, in dependency
// order (org, providers, groups, projects, routes, keys). Secrets of created
// virtual keys are printed once to out. It stops at the first invalid
// resource; the resources created before it stay, and a re-run skips them.
func Apply(ctx context.Context, svc *admin.Service, f *File, out io.Writer, log *slog.Logger) error {
	skip := func(kind, name string) { log.Info("config: exists, left unchanged", "kind", kind, "name", name) }
	for oi, o := range f.Orgs {
		where := fmt.Sprintf("orgs[%d]", oi)
		if _, err := svc.CreateOrg(ctx, o.input()); admin.AlreadyExists(err) {
			skip("org", o.Name)
		} else if err != nil {
			return wrap(where, err)
		}
		for pi, p := range o.Providers {
			if _, err := svc.CreateProvider(ctx, o.Name, p.input()); admin.AlreadyExists(err) {
				skip("provider", o.Name+"/"+firstNonEmpty(p.Slug, p.Name))
			} else if err != nil {
				return wrap(fmt.Sprintf("%s.providers[%d]", where, pi), err)
			}
		}
		for gi, g := range o.Groups {
			if _, err := svc.CreateGroup(ctx, o.Name, g.input()); admin.AlreadyExists(err) {
				skip("group", o.Name+"/"+firstNonEmpty(g.Slug, g.Name))
			} else if err != nil {
				return wrap(fmt.Sprintf("%s.groups[%d]", where, gi), err)
			}
		}
		for pi, p := range o.Projects {
			pw := fmt.Sprintf("%s.projects[%d]", where, pi)
			if _, err := svc.CreateProject(ctx, o.Name, p.input()); admin.AlreadyExists(err) {
				skip("project", o.Name+"/"+p.Name)
			} else if err != nil {
				return wrap(pw, err)
			}
			for ri, r := range p.Routes {
				if _, err := svc.CreateRoute(ctx, o.Name, p.Name, r.input()); admin.AlreadyExists(err) {
					skip("route", o.Name+"/"+p.Name+"/"+r.Model)
				} else if err != nil {
					return wrap(fmt.Sprintf("%s.routes[%d]", pw, ri), err)
				}
			}
			for ki, k := range p.Keys {
				exists, err := svc.HasLiveVirtualKey(ctx, o.Name, p.Name, k.Name)
				if err != nil {
					return wrap(fmt.Sprintf("%s.keys[%d]", pw, ki), err)
				}
				if exists {
					skip("virtual key", o.Name+"/"+p.Name+"/"+k.Name)
					continue
				}
				v, err := svc.CreateVirtualKey(ctx, o.Name, p.Name, k.input())
				if err != nil {
					return wrap(fmt.Sprintf("%s.keys[%d]", pw, ki), err)
				}
				fmt.Fprintf(out, "rolter: config created virtual key %q in %s/%s: %s (shown once)\n", k.Name, o.Name, p.Name, v.Secret)
			}
		}
	}
	return nil
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
