package config

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/store"
)

// FromDesired is d (an export of the gateway's state) in the file format.
// It holds no secret: every pool key is a reference to the variable
// recorded as its ref, and a key recorded without one gets a placeholder
// named after its org, provider and position, listed in placeholders so
// that the caller can say which variables to set before applying the file.
func FromDesired(d admin.Desired) (f *File, placeholders []string) {
	f = &File{Orgs: []Org{}}
	for _, do := range d.Orgs {
		o := Org{Name: do.Name, Description: do.Description}
		for _, p := range do.Providers {
			fp := Provider{Name: p.Name, Slug: p.Slug, Kind: p.Kind, BaseURL: p.BaseURL, MetadataSource: p.MetadataSource,
				ContextLimit: p.ContextLimit, Models: p.Models, FirstByteTimeout: p.FirstByteTimeout, IdleTimeout: p.IdleTimeout,
				ForwardHeaders: p.ForwardHeaders, Policy: policyOf(p.Policy), Prices: pricesOf(p.Prices)}
			for i, k := range p.Keys {
				ref := k.Ref
				if ref == "" {
					ref = placeholder(do.Name, p.Slug, i+1)
					placeholders = append(placeholders, ref)
				}
				fp.Keys = append(fp.Keys, ProviderKey{SecretEnv: ref, Weight: k.Weight})
			}
			o.Providers = append(o.Providers, fp)
		}
		for _, g := range do.Groups {
			fg := Group{Slug: g.Slug, Name: g.Name, Strategy: g.Strategy, Policy: policyOf(g.Policy)}
			for _, m := range g.Members {
				fg.Members = append(fg.Members, GroupMember{Provider: m.Provider, Weight: m.Weight, ModelMap: m.ModelMap})
			}
			o.Groups = append(o.Groups, fg)
		}
		for _, p := range do.Projects {
			fp := Project{Name: p.Name, Description: p.Description, Budget: budgetOf(p.Budget), RPMLimit: p.RPMLimit, TPMLimit: p.TPMLimit}
			for _, r := range p.Routes {
				fr := Route{Model: r.Model, Strategy: r.Strategy, Policy: policyOf(r.Policy), RPMLimit: r.RPMLimit, TPMLimit: r.TPMLimit,
					Fallbacks: r.Fallbacks, ContextFallback: r.ContextFallback}
				for _, t := range r.Targets {
					fr.Targets = append(fr.Targets, Target{Provider: t.Provider, UpstreamModel: t.UpstreamModel, Weight: t.Weight,
						Priority: t.Priority, ContextLimit: t.ContextLimit, Prices: pricesOf(t.Prices)})
				}
				fp.Routes = append(fp.Routes, fr)
			}
			for _, k := range p.Keys {
				fp.Keys = append(fp.Keys, VirtualKey{Name: k.Name, Models: k.Models, ExpiresAt: k.ExpiresAt, RPMLimit: k.RPMLimit,
					TPMLimit: k.TPMLimit, Budget: budgetOf(k.Budget)})
			}
			o.Projects = append(o.Projects, fp)
		}
		for _, h := range do.Hosts {
			fh := Host{IP: h.IP, Port: h.Port, Project: h.Project, ModelName: h.ModelName, Notes: h.Notes, AutoApply: h.AutoApply}
			fh.DrainTimeout = h.DrainTimeout
			if v := h.Recipe.VLLM; v != nil {
				s := v.Source
				fh.Recipe.VLLM = &VLLM{Model: v.Model, VRAMGB: v.VRAMGB, DiskGB: v.DiskGB, Args: v.Args, KVCache: v.KVCache,
					Source: Source{Kind: s.Kind, Repo: s.Repo, Revision: s.Revision, URL: s.URL, Ref: s.Ref, Path: s.Path}}
			}
			o.Hosts = append(o.Hosts, fh)
		}
		f.Orgs = append(f.Orgs, o)
	}
	return f, placeholders
}

// placeholder names the variable of a pool key recorded without one:
// ORG_SLUG_KEY_N, upper case, other characters as '_'.
func placeholder(org, slug string, n int) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, fmt.Sprintf("%s_%s_KEY_%d", org, slug, n))
	if name[0] >= '0' && name[0] <= '9' {
		name = "_" + name
	}
	return name
}

func policyOf(p store.Policy) Policy { return Policy(p) }

func pricesOf(p *admin.PricesInput) *Prices {
	if p == nil {
		return nil
	}
	return &Prices{Input: string(p.Input), Output: string(p.Output)}
}

func budgetOf(b *admin.BudgetInput) *Budget {
	if b == nil {
		return nil
	}
	return &Budget{Amount: string(b.Amount), Period: b.Period}
}

// MarshalYAML writes a key as the reference to its variable, never a
// secret: a file written by rolter (export) holds none.
func (k ProviderKey) MarshalYAML() (any, error) {
	out := struct {
		Secret string `yaml:"secret,omitempty"`
		Weight *int   `yaml:"weight,omitempty"`
	}{Weight: k.Weight}
	if k.SecretEnv != "" {
		out.Secret = "os.environ/" + k.SecretEnv
	}
	return out, nil
}

// Marshal writes f in the file format, with two-space indents.
func Marshal(f *File) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
