package config

import (
	"time"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// The file format. Its keys are the admin API's JSON field names, but the
// types are the file's own: the admin inputs are what the domain service
// takes, and a config file maps onto them (the input methods below) rather
// than being them. Only the file has secret_env, for instance.

// File is the document root.
type File struct {
	Orgs []Org `yaml:"orgs"`
}

// Org is an org with the resources it owns.
type Org struct {
	Name        string     `yaml:"name,omitempty"`
	Description string     `yaml:"description,omitempty"`
	Providers   []Provider `yaml:"providers,omitempty"`
	// Groups are created after the providers they name. A group whose slug
	// is taken, by a group or a provider, counts as existing and is skipped.
	Groups   []Group   `yaml:"groups,omitempty"`
	Projects []Project `yaml:"projects,omitempty"`
	// Hosts are fleet assignments (rolter apply); each names its project.
	Hosts []Host `yaml:"hosts,omitempty"`
}

// Provider is an upstream of the org.
type Provider struct {
	Name             string         `yaml:"name,omitempty"`
	Slug             string         `yaml:"slug,omitempty"`
	Kind             string         `yaml:"kind,omitempty"`
	BaseURL          string         `yaml:"base_url,omitempty"`
	MetadataSource   string         `yaml:"metadata_source,omitempty"`
	ContextLimit     int            `yaml:"context_limit,omitempty"`
	Models           []string       `yaml:"models,omitempty"`
	FirstByteTimeout store.Duration `yaml:"first_byte_timeout,omitempty"`
	IdleTimeout      store.Duration `yaml:"idle_timeout,omitempty"`
	ForwardHeaders   []string       `yaml:"forward_headers,omitempty"`
	Policy           Policy         `yaml:"policy,omitempty"`
	Keys             []ProviderKey  `yaml:"keys,omitempty"`
	Prices           *Prices        `yaml:"prices,omitempty"`
	// PreviousSlug and AllowSlugChange move an existing provider to Slug
	// (rolter apply): see SlugChange in package admin.
	PreviousSlug    string `yaml:"previous_slug,omitempty"`
	AllowSlugChange bool   `yaml:"allow_slug_change,omitempty"`
}

// ProviderKey is one upstream credential: the secret itself, or SecretEnv,
// the environment variable that holds it (resolved by Parse), so that
// credentials need not live in the file. A secret written as a reference,
// "os.environ/NAME" (as in LiteLLM configs) or "${NAME}", is SecretEnv NAME.
// The variable's name is recorded with the key as its ref.
type ProviderKey struct {
	Secret    secret.Secret `yaml:"secret,omitempty"`
	SecretEnv string        `yaml:"secret_env,omitempty"`
	Weight    *int          `yaml:"weight,omitempty"`
}

// Group is a provider group of the org.
type Group struct {
	Slug     string        `yaml:"slug,omitempty"`
	Name     string        `yaml:"name,omitempty"`
	Strategy string        `yaml:"strategy,omitempty"`
	Members  []GroupMember `yaml:"members,omitempty"`
	Policy   Policy        `yaml:"policy,omitempty"`
	// PreviousSlug and AllowSlugChange move an existing group to Slug.
	PreviousSlug    string `yaml:"previous_slug,omitempty"`
	AllowSlugChange bool   `yaml:"allow_slug_change,omitempty"`
}

// GroupMember is one provider of a group, named by slug.
type GroupMember struct {
	Provider string            `yaml:"provider,omitempty"`
	Weight   *int              `yaml:"weight,omitempty"`
	ModelMap map[string]string `yaml:"model_map,omitempty"`
}

// Project is a project with its routes and keys.
type Project struct {
	Name        string       `yaml:"name,omitempty"`
	Description string       `yaml:"description,omitempty"`
	Budget      *Budget      `yaml:"budget,omitempty"`
	RPMLimit    int          `yaml:"rpm_limit,omitempty"`
	TPMLimit    int          `yaml:"tpm_limit,omitempty"`
	Routes      []Route      `yaml:"routes,omitempty"`
	Keys        []VirtualKey `yaml:"keys,omitempty"`
}

// Route is a route of the project.
type Route struct {
	Model    string   `yaml:"model,omitempty"`
	Strategy string   `yaml:"strategy,omitempty"`
	Targets  []Target `yaml:"targets,omitempty"`
	Policy   Policy   `yaml:"policy,omitempty"`
	RPMLimit int      `yaml:"rpm_limit,omitempty"`
	TPMLimit int      `yaml:"tpm_limit,omitempty"`
	// Fallbacks and ContextFallback name other routes of the project
	// (docs/data-path.md, "Fallback routes").
	Fallbacks       []string `yaml:"fallbacks,omitempty"`
	ContextFallback string   `yaml:"context_fallback,omitempty"`
}

// Target is one route target, naming its provider by slug.
type Target struct {
	Provider      string  `yaml:"provider,omitempty"`
	UpstreamModel string  `yaml:"upstream_model,omitempty"`
	Weight        *int    `yaml:"weight,omitempty"`
	Priority      int     `yaml:"priority,omitempty"`
	ContextLimit  int     `yaml:"context_limit,omitempty"`
	Prices        *Prices `yaml:"prices,omitempty"`
}

// VirtualKey is a virtual key of the project; its secret is generated.
type VirtualKey struct {
	Name      string     `yaml:"name,omitempty"`
	Models    []string   `yaml:"models,omitempty"`
	ExpiresAt *time.Time `yaml:"expires_at,omitempty"`
	RPMLimit  int        `yaml:"rpm_limit,omitempty"`
	TPMLimit  int        `yaml:"tpm_limit,omitempty"`
	Budget    *Budget    `yaml:"budget,omitempty"`
}

// Policy is the policy of a provider, group or route.
type Policy struct {
	MaxOutputTokens int    `yaml:"max_output_tokens,omitempty"`
	Tools           string `yaml:"tools,omitempty"`
	Media           string `yaml:"media,omitempty"`
	MaxConcurrency  int    `yaml:"max_concurrency,omitempty"`
}

// Prices are USD per million tokens, as written (numbers or strings); the
// service parses and checks them.
type Prices struct {
	Input  string `yaml:"input,omitempty"`
	Output string `yaml:"output,omitempty"`
}

// Budget is a spend cap per period, the amount as written.
type Budget struct {
	Amount string `yaml:"amount,omitempty"`
	Period string `yaml:"period,omitempty"`
}

// Host is a fleet host: a GPU box at IP serving ModelName (a route of
// Project, default "default") on Port with Recipe. Its API key is minted
// on creation.
type Host struct {
	IP        string `yaml:"ip,omitempty"`
	Port      int    `yaml:"port,omitempty"`
	Project   string `yaml:"project,omitempty"`
	ModelName string `yaml:"model_name,omitempty"`
	Recipe    Recipe `yaml:"recipe,omitempty"`
	Notes     string `yaml:"notes,omitempty"`
	AutoApply bool   `yaml:"auto_apply,omitempty"`
	// DrainTimeout bounds the drain before a restart (absent: 120s).
	DrainTimeout *store.Duration `yaml:"drain_timeout,omitempty"`
	// HFToken is the hf source's credential, best written as an
	// environment reference ("os.environ/HF_TOKEN" or "${HF_TOKEN}");
	// absent: the stored one stays. Export never writes it.
	HFToken secret.Secret `yaml:"hf_token,omitempty"`
}

// Recipe is what a host runs (design 002).
type Recipe struct {
	VLLM *VLLM `yaml:"vllm,omitempty"`
}

// VLLM is a recipe's vllm block.
type VLLM struct {
	Model  string   `yaml:"model,omitempty"`
	Source Source   `yaml:"source,omitempty"`
	VRAMGB float64  `yaml:"vram_gb,omitempty"`
	DiskGB float64  `yaml:"disk_gb,omitempty"`
	Args   []string `yaml:"args,omitempty"`
	// KVCache is "auto" to have the box calibrate --kv-cache-memory.
	KVCache string `yaml:"kv_cache,omitempty"`
}

// Source says where a recipe's weights come from.
type Source struct {
	Kind     string `yaml:"kind,omitempty"`
	Repo     string `yaml:"repo,omitempty"`
	Revision string `yaml:"revision,omitempty"`
	URL      string `yaml:"url,omitempty"`
	Ref      string `yaml:"ref,omitempty"`
	Path     string `yaml:"path,omitempty"`
}

func (o Org) input() admin.OrgInput {
	return admin.OrgInput{Name: o.Name, Description: o.Description}
}

func (p Provider) input() admin.ProviderInput {
	in := admin.ProviderInput{
		Name: p.Name, Slug: p.Slug, Kind: p.Kind, BaseURL: p.BaseURL,
		MetadataSource: p.MetadataSource, ContextLimit: p.ContextLimit, Models: p.Models,
		FirstByteTimeout: p.FirstByteTimeout, IdleTimeout: p.IdleTimeout,
		ForwardHeaders: p.ForwardHeaders, Policy: p.Policy.store(), Prices: p.Prices.input(),
	}
	for _, k := range p.Keys {
		in.Keys = append(in.Keys, admin.KeyInput{Secret: k.Secret, Weight: k.Weight})
	}
	return in
}

func (g Group) input() admin.GroupInput {
	in := admin.GroupInput{Slug: g.Slug, Name: g.Name, Strategy: g.Strategy, Policy: g.Policy.store()}
	for _, m := range g.Members {
		in.Members = append(in.Members, admin.GroupMemberInput{Provider: m.Provider, Weight: m.Weight, ModelMap: m.ModelMap})
	}
	return in
}

func (p Project) input() admin.ProjectInput {
	return admin.ProjectInput{
		Name: p.Name, Description: p.Description, Budget: p.Budget.input(),
		RPMLimit: p.RPMLimit, TPMLimit: p.TPMLimit,
	}
}

func (r Route) input() admin.RouteInput {
	in := admin.RouteInput{
		Model: r.Model, Strategy: r.Strategy, Policy: r.Policy.store(),
		RPMLimit: r.RPMLimit, TPMLimit: r.TPMLimit, Fallbacks: r.Fallbacks, ContextFallback: r.ContextFallback,
	}
	for _, t := range r.Targets {
		in.Targets = append(in.Targets, admin.TargetInput{
			Provider: t.Provider, UpstreamModel: t.UpstreamModel, Weight: t.Weight, Priority: t.Priority,
			ContextLimit: t.ContextLimit, Prices: t.Prices.input(),
		})
	}
	return in
}

func (k VirtualKey) input() admin.VirtualKeyInput {
	return admin.VirtualKeyInput{
		Name: k.Name, Models: k.Models, ExpiresAt: k.ExpiresAt,
		RPMLimit: k.RPMLimit, TPMLimit: k.TPMLimit, Budget: k.Budget.input(),
	}
}

func (p Policy) store() store.Policy {
	return store.Policy{MaxOutputTokens: p.MaxOutputTokens, Tools: p.Tools, Media: p.Media, MaxConcurrency: p.MaxConcurrency}
}

func (p *Prices) input() *admin.PricesInput {
	if p == nil {
		return nil
	}
	return &admin.PricesInput{Input: admin.Decimal(p.Input), Output: admin.Decimal(p.Output)}
}

func (b *Budget) input() *admin.BudgetInput {
	if b == nil {
		return nil
	}
	return &admin.BudgetInput{Amount: admin.Decimal(b.Amount), Period: b.Period}
}

// desired maps the org and everything in it onto the admin desired state.
// A key's variable is recorded as its ref.
func (o Org) desired() admin.DesiredOrg {
	d := admin.DesiredOrg{OrgInput: o.input()}
	for _, p := range o.Providers {
		in := p.input()
		for i, k := range p.Keys {
			in.Keys[i].Ref = k.SecretEnv
		}
		d.Providers = append(d.Providers, admin.DesiredProvider{ProviderInput: in,
			SlugChange: admin.SlugChange{PreviousSlug: p.PreviousSlug, AllowSlugChange: p.AllowSlugChange}})
	}
	for _, g := range o.Groups {
		d.Groups = append(d.Groups, admin.DesiredGroup{GroupInput: g.input(),
			SlugChange: admin.SlugChange{PreviousSlug: g.PreviousSlug, AllowSlugChange: g.AllowSlugChange}})
	}
	for _, p := range o.Projects {
		dp := admin.DesiredProject{ProjectInput: p.input()}
		for _, r := range p.Routes {
			dp.Routes = append(dp.Routes, r.input())
		}
		for _, k := range p.Keys {
			dp.Keys = append(dp.Keys, k.input())
		}
		d.Projects = append(d.Projects, dp)
	}
	for _, h := range o.Hosts {
		d.Hosts = append(d.Hosts, h.input())
	}
	return d
}

func (h Host) input() admin.HostInput {
	return admin.HostInput{IP: h.IP, Port: h.Port, Project: h.Project, ModelName: h.ModelName, Recipe: h.Recipe.input(),
		Notes: h.Notes, AutoApply: h.AutoApply, DrainTimeout: h.DrainTimeout, HFToken: optionalSecret(h.HFToken)}
}

func optionalSecret(s secret.Secret) *secret.Secret {
	if s.IsZero() {
		return nil
	}
	return &s
}

func (r Recipe) input() fleetapi.Recipe {
	if r.VLLM == nil {
		return fleetapi.Recipe{}
	}
	v := r.VLLM
	return fleetapi.Recipe{VLLM: &fleetapi.VLLM{Model: v.Model, VRAMGB: v.VRAMGB, DiskGB: v.DiskGB, Args: v.Args, KVCache: v.KVCache,
		Source: fleetapi.Source{Kind: v.Source.Kind, Repo: v.Source.Repo, Revision: v.Source.Revision, URL: v.Source.URL,
			Ref: v.Source.Ref, Path: v.Source.Path}}}
}
