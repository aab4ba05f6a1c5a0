package config

import (
	"time"

	"github.com/rolter/rolter/internal/admin"
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
	Name        string     `yaml:"name"`
	Description string     `yaml:"description"`
	Providers   []Provider `yaml:"providers"`
	// Groups are created after the providers they name. A group whose slug
	// is taken, by a group or a provider, counts as existing and is skipped.
	Groups   []Group   `yaml:"groups"`
	Projects []Project `yaml:"projects"`
}

// Provider is an upstream of the org.
type Provider struct {
	Name             string         `yaml:"name"`
	Slug             string         `yaml:"slug"`
	Kind             string         `yaml:"kind"`
	BaseURL          string         `yaml:"base_url"`
	MetadataSource   string         `yaml:"metadata_source"`
	ContextLimit     int            `yaml:"context_limit"`
	Models           []string       `yaml:"models"`
	FirstByteTimeout store.Duration `yaml:"first_byte_timeout"`
	IdleTimeout      store.Duration `yaml:"idle_timeout"`
	ForwardHeaders   []string       `yaml:"forward_headers"`
	Policy           Policy         `yaml:"policy"`
	Keys             []ProviderKey  `yaml:"keys"`
	Prices           *Prices        `yaml:"prices"`
}

// ProviderKey is one upstream credential: the secret itself, or SecretEnv,
// the environment variable that holds it (resolved by Parse), so that
// credentials need not live in the file.
type ProviderKey struct {
	Secret    secret.Secret `yaml:"secret"`
	SecretEnv string        `yaml:"secret_env"`
	Weight    *int          `yaml:"weight"`
}

// Group is a provider group of the org.
type Group struct {
	Slug     string        `yaml:"slug"`
	Name     string        `yaml:"name"`
	Strategy string        `yaml:"strategy"`
	Members  []GroupMember `yaml:"members"`
	Policy   Policy        `yaml:"policy"`
}

// GroupMember is one provider of a group, named by slug.
type GroupMember struct {
	Provider string            `yaml:"provider"`
	Weight   *int              `yaml:"weight"`
	ModelMap map[string]string `yaml:"model_map"`
}

// Project is a project with its routes and keys.
type Project struct {
	Name        string       `yaml:"name"`
	Description string       `yaml:"description"`
	Budget      *Budget      `yaml:"budget"`
	RPMLimit    int          `yaml:"rpm_limit"`
	TPMLimit    int          `yaml:"tpm_limit"`
	Routes      []Route      `yaml:"routes"`
	Keys        []VirtualKey `yaml:"keys"`
}

// Route is a route of the project.
type Route struct {
	Model    string   `yaml:"model"`
	Strategy string   `yaml:"strategy"`
	Targets  []Target `yaml:"targets"`
	Policy   Policy   `yaml:"policy"`
	RPMLimit int      `yaml:"rpm_limit"`
	TPMLimit int      `yaml:"tpm_limit"`
}

// Target is one route target, naming its provider by slug.
type Target struct {
	Provider      string  `yaml:"provider"`
	UpstreamModel string  `yaml:"upstream_model"`
	Weight        *int    `yaml:"weight"`
	ContextLimit  int     `yaml:"context_limit"`
	Prices        *Prices `yaml:"prices"`
}

// VirtualKey is a virtual key of the project; its secret is generated.
type VirtualKey struct {
	Name      string     `yaml:"name"`
	Models    []string   `yaml:"models"`
	ExpiresAt *time.Time `yaml:"expires_at"`
	RPMLimit  int        `yaml:"rpm_limit"`
	TPMLimit  int        `yaml:"tpm_limit"`
	Budget    *Budget    `yaml:"budget"`
}

// Policy is the policy of a provider, group or route.
type Policy struct {
	MaxOutputTokens int    `yaml:"max_output_tokens"`
	Tools           string `yaml:"tools"`
	Media           string `yaml:"media"`
	MaxConcurrency  int    `yaml:"max_concurrency"`
}

// Prices are USD per million tokens, as written (numbers or strings); the
// service parses and checks them.
type Prices struct {
	Input  string `yaml:"input"`
	Output string `yaml:"output"`
}

// Budget is a spend cap per period, the amount as written.
type Budget struct {
	Amount string `yaml:"amount"`
	Period string `yaml:"period"`
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
		RPMLimit: r.RPMLimit, TPMLimit: r.TPMLimit,
	}
	for _, t := range r.Targets {
		in.Targets = append(in.Targets, admin.TargetInput{
			Provider: t.Provider, UpstreamModel: t.UpstreamModel, Weight: t.Weight,
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
