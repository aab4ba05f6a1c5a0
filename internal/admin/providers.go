package admin

import (
	"context"
	"fmt"
	"net/textproto"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// MaxWeight is the largest weight of a provider key or a route target.
const MaxWeight = 1_000_000

// Bounds on the lists a caller chooses, so no request can make the
// gateway hold (and re-read on every snapshot build) without limit: a
// provider's models, a group member's model_map, a group's members, a
// route's targets and a provider's key pool.
const (
	MaxListItems = 1000
	MaxTargets   = 256
)

// ProviderInput creates a provider.
type ProviderInput struct {
	Name             string         `json:"name"`
	Slug             string         `json:"slug,omitempty"`
	Kind             string         `json:"kind"`
	BaseURL          string         `json:"base_url"`
	MetadataSource   string         `json:"metadata_source,omitempty"`
	ContextLimit     int            `json:"context_limit,omitempty"`
	Models           []string       `json:"models,omitempty"`
	FirstByteTimeout store.Duration `json:"first_byte_timeout,omitempty"`
	IdleTimeout      store.Duration `json:"idle_timeout,omitempty"`
	ForwardHeaders   []string       `json:"forward_headers,omitempty"`
	// Policy governs every request the provider serves, on any address
	// (the strictest of it and the address's policy applies).
	Policy store.Policy `json:"policy"`
	Keys   []KeyInput   `json:"keys,omitempty"`
	// Prices are what the provider's tokens cost; absent: unpriced.
	Prices *PricesInput `json:"prices,omitempty"`
	// Import is the importer's record (rolter import); Go callers only,
	// never read from or shown in the API.
	Import *store.ProviderImport `json:"-"`
}

// KeyInput is one upstream credential for a provider's key pool.
type KeyInput struct {
	Secret secret.Secret `json:"secret,omitzero"`
	Weight *int          `json:"weight,omitempty"`
	// Ref names the environment variable the secret was read from (a
	// config file's os.environ/NAME), recorded so that an export names it
	// again and an apply knows the key by it; optional.
	Ref string `json:"ref,omitempty"`
}

// ProviderPatch changes a provider; absent fields stay. Keys are managed
// through /providers/{slug}/keys.
type ProviderPatch struct {
	Name             *string         `json:"name"`
	Slug             *string         `json:"slug"`
	Kind             *string         `json:"kind"`
	BaseURL          *string         `json:"base_url"`
	MetadataSource   *string         `json:"metadata_source"`
	ContextLimit     *int            `json:"context_limit"`
	Models           *[]string       `json:"models"`
	FirstByteTimeout *store.Duration `json:"first_byte_timeout"`
	IdleTimeout      *store.Duration `json:"idle_timeout"`
	ForwardHeaders   *[]string       `json:"forward_headers"`
	Policy           *store.Policy   `json:"policy"`
	// Prices replaces the prices; null removes them.
	Prices nullable[PricesInput] `json:"prices"`
	// Import replaces the importer's record (rolter import); Go callers
	// only, never read from the API.
	Import *store.ProviderImport `json:"-"`
}

// ProviderView is a provider as the API shows it: key ids and weights,
// never key secrets.
type ProviderView struct {
	Slug             string         `json:"slug"`
	Name             string         `json:"name"`
	Kind             string         `json:"kind"`
	BaseURL          string         `json:"base_url"`
	MetadataSource   string         `json:"metadata_source"`
	ContextLimit     int            `json:"context_limit,omitempty"`
	Models           []string       `json:"models,omitempty"`
	FirstByteTimeout store.Duration `json:"first_byte_timeout,omitempty"`
	IdleTimeout      store.Duration `json:"idle_timeout,omitempty"`
	ForwardHeaders   []string       `json:"forward_headers,omitempty"`
	Policy           store.Policy   `json:"policy"`
	Prices           *store.Prices  `json:"prices,omitempty"`
	Keys             []KeyView      `json:"keys"`
	CreatedAt        time.Time      `json:"created_at"`
	UpdatedAt        time.Time      `json:"updated_at"`
	DeletedAt        *time.Time     `json:"deleted_at,omitempty"`
	// Readiness is the live health and discovered metadata (SPEC §5).
	Readiness *ReadinessView `json:"readiness,omitempty"`
	Warnings  []string       `json:"warnings,omitempty"`
}

// KeyView is a pool key without its secret.
type KeyView struct {
	ID     int64  `json:"id"`
	Weight int    `json:"weight"`
	Ref    string `json:"ref,omitempty"`
	// CreatedAt is when the key was added.
	CreatedAt time.Time `json:"created_at"`
}

// providerView adds the live readiness to a provider view.
func (s *Service) providerView(p store.Provider) ProviderView {
	v := providerView(p)
	if p.DeletedAt == nil {
		v.Readiness = s.readiness(p.ID)
	}
	return v
}

func providerView(p store.Provider) ProviderView {
	v := ProviderView{Slug: p.Slug, Name: p.Name, Kind: p.Kind, BaseURL: p.BaseURL, MetadataSource: p.MetadataSource,
		ContextLimit: p.ContextLimit, Models: p.Models, FirstByteTimeout: p.Settings.FirstByteTimeout,
		IdleTimeout: p.Settings.IdleTimeout, ForwardHeaders: p.Settings.ForwardHeaders, Policy: p.Settings.Policy, Prices: p.Settings.Prices,
		Keys: []KeyView{}, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt, DeletedAt: p.DeletedAt}
	for _, k := range p.Keys {
		v.Keys = append(v.Keys, KeyView{ID: k.ID, Weight: k.Weight, Ref: k.Ref, CreatedAt: k.CreatedAt})
	}
	return v
}

// checkBaseURL accepts absolute http(s) URLs without credentials, query or
// fragment whose host passes the upstream address policy (hardening.go),
// and returns it without a trailing slash.
func checkBaseURL(fe fieldErrors, raw string, allowLinkLocal bool) string {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		fe.add("base_url", "is required")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		fe.add("base_url", "must be an absolute http:// or https:// URL, e.g. http://10.0.0.5:8000/v1")
	case u.User != nil:
		fe.add("base_url", "must not carry credentials; put them in keys")
	case u.RawQuery != "" || u.Fragment != "":
		fe.add("base_url", "must not have a query or fragment")
	default:
		if why := upstreamHostRefusal(u.Hostname(), allowLinkLocal); why != "" {
			fe.add("base_url", "host %s", why)
		}
	}
	return strings.TrimRight(raw, "/")
}

// refPattern is the shape of a key's ref: an environment variable name.
var refPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// ValidKeyRef reports whether ref may be recorded as a pool key's ref:
// an environment variable name (what checkKeyRef accepts, "" aside).
func ValidKeyRef(ref string) bool { return refPattern.MatchString(ref) }

// checkKeyRef validates a pool key's ref ("" is none).
func checkKeyRef(fe fieldErrors, field, ref string) {
	if ref != "" && !ValidKeyRef(ref) {
		fe.add(field, "must be an environment variable name: up to 128 letters, digits and '_', not starting with a digit")
	}
}

func checkWeight(fe fieldErrors, field string, w *int) int {
	if w == nil {
		return 1
	}
	if *w < 0 || *w > MaxWeight {
		fe.add(field, "must be from 0 to %d", MaxWeight)
	}
	return *w
}

// checkProvider validates the fields a create and a patch share.
func checkProvider(fe fieldErrors, p *store.Provider, allowLinkLocal bool) {
	if strings.TrimSpace(p.Name) == "" || len(p.Name) > 200 {
		fe.add("name", "is required (1-200 characters)")
	}
	if !slugPattern.MatchString(p.Slug) {
		fe.add("slug", slugRule)
	}
	if !contains(store.ProviderKinds, p.Kind) {
		fe.add("kind", "must be one of %s", strings.Join(store.ProviderKinds, ", "))
	}
	p.BaseURL = checkBaseURL(fe, p.BaseURL, allowLinkLocal)
	switch p.MetadataSource {
	case store.MetadataConfigured:
	case store.MetadataUpstream:
		if p.Kind == store.KindOpenAI || p.Kind == store.KindAnthropic {
			// design 003: discovery needs one inference server serving
			// exactly one model; a hosted API lists many, so such a
			// provider would never be ready.
			fe.add("metadata_source", "\"upstream\" is for self-hosted kinds (vllm, sglang, llamacpp) serving one model; a hosted %s API lists many models, so nothing could be discovered: use \"configured\" with models or route targets' upstream_model", p.Kind)
		}
		// design 003: facts the upstream owns are never configured beside it.
		if p.ContextLimit != 0 {
			fe.add("context_limit", "cannot be configured when metadata_source is \"upstream\": the upstream reports it")
		}
		if len(p.Models) > 0 {
			fe.add("models", "cannot be configured when metadata_source is \"upstream\": the upstream reports it")
		}
	default:
		fe.add("metadata_source", "must be %q or %q", store.MetadataConfigured, store.MetadataUpstream)
	}
	if p.ContextLimit < 0 {
		fe.add("context_limit", "must be positive")
	}
	if len(p.Models) > MaxListItems {
		fe.add("models", "holds %d names; at most %d", len(p.Models), MaxListItems)
	} else {
		for i, m := range p.Models {
			if strings.TrimSpace(m) == "" {
				fe.add(fmt.Sprintf("models[%d]", i), "must not be empty")
			}
		}
	}
	p.Settings.ForwardHeaders = checkForwardHeaders(fe, p.Settings.ForwardHeaders)
	checkPolicy(fe, p.Settings.Policy)
}

// maxForwardHeaders bounds a provider's forward_headers list.
const maxForwardHeaders = 16

// neverForwarded are headers the gateway owns on the upstream request:
// credentials, framing, hop-by-hop, and its own request id. No
// forward_headers entry may name or match one.
var neverForwarded = []string{"Authorization", "X-Api-Key", "Cookie", "Host", "Content-Length", "Content-Type",
	"Content-Encoding", "Transfer-Encoding", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade",
	"Proxy-Authorization", "Proxy-Authenticate", "Proxy-Connection", "Accept-Encoding", "X-Request-Id", "X-Rolter-Provider"}

// checkForwardHeaders validates header names (RFC 9110 tokens, a trailing
// "*" for a prefix) and returns them in canonical form.
func checkForwardHeaders(fe fieldErrors, hs []string) []string {
	if len(hs) > maxForwardHeaders {
		fe.add("forward_headers", "at most %d entries", maxForwardHeaders)
		return hs
	}
	out := make([]string, 0, len(hs))
	for i, h := range hs {
		field := fmt.Sprintf("forward_headers[%d]", i)
		name, prefix := strings.CutSuffix(h, "*")
		if name == "" || len(h) > 64 || !isToken(name) || prefix && !strings.HasSuffix(name, "-") {
			fe.add(field, "must be a header name of up to 64 characters, or a prefix ending in \"-*\" such as \"X-Trace-*\"")
			continue
		}
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if prefix {
			canon = textproto.CanonicalMIMEHeaderKey(name + "x")
			canon = canon[:len(canon)-1]
		}
		for _, n := range neverForwarded {
			if n == canon || prefix && strings.HasPrefix(n, canon) {
				fe.add(field, "covers %s, which the gateway sets itself: credentials, framing and hop-by-hop headers are never forwarded", n)
				break
			}
		}
		if prefix {
			canon += "*"
		}
		out = append(out, canon)
	}
	return out
}

// isToken reports whether s is an RFC 9110 token (a header name).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// CreateProvider creates a provider with its key pool. A missing slug is
// derived from the name; a taken slug is ErrConflict with a suggestion,
// never a silent suffix.
func (s *Service) CreateProvider(ctx context.Context, org string, in ProviderInput) (ProviderView, error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return ProviderView{}, err
	}
	p, err := s.newProvider(o, in)
	if err != nil {
		return ProviderView{}, err
	}
	if err := s.committed(ctx, s.fromSlugWrite(ctx, o.ID, p.Slug, s.st.CreateProvider(ctx, p), "provider")); err != nil {
		return ProviderView{}, err
	}
	return providerView(*p), nil
}

// newProvider is the provider in creates in org o, checked.
func (s *Service) newProvider(o *store.Org, in ProviderInput) (*store.Provider, error) {
	fe := fieldErrors{}
	p := &store.Provider{OrgID: o.ID, Slug: in.Slug, Name: in.Name, Kind: in.Kind, BaseURL: in.BaseURL,
		MetadataSource: in.MetadataSource, ContextLimit: in.ContextLimit, Models: in.Models,
		Settings: store.ProviderSettings{FirstByteTimeout: in.FirstByteTimeout, IdleTimeout: in.IdleTimeout, ForwardHeaders: in.ForwardHeaders,
			Policy: in.Policy, Import: in.Import}}
	p.Settings.Prices = checkPrices(fe, "prices", in.Prices)
	if p.MetadataSource == "" {
		p.MetadataSource = store.MetadataConfigured
	}
	nameAndSlug(fe, &p.Name, &p.Slug)
	if len(in.Keys) > MaxTargets {
		fe.add("keys", "holds %d keys; at most %d", len(in.Keys), MaxTargets)
		in.Keys = nil
	}
	for i, k := range in.Keys {
		if k.Secret.IsZero() {
			fe.add(fmt.Sprintf("keys[%d].secret", i), "is required")
		}
		checkKeyRef(fe, fmt.Sprintf("keys[%d].ref", i), k.Ref)
		p.Keys = append(p.Keys, store.ProviderKey{Secret: k.Secret, Weight: checkWeight(fe, fmt.Sprintf("keys[%d].weight", i), k.Weight), Ref: k.Ref})
	}
	checkProvider(fe, p, s.allowLinkLocal)
	if err := fe.err(); err != nil {
		return nil, err
	}
	return p, nil
}

// provider finds a provider by slug, soft-deleted included.
func (s *Service) provider(ctx context.Context, org, slug string) (*store.Org, *store.Provider, error) {
	return inOrg(ctx, s, org, "provider", slug, s.st.GetProvider)
}

// liveProvider is provider, but a soft-deleted one is not found for writes.
func (s *Service) liveProvider(ctx context.Context, org, slug string) (*store.Org, *store.Provider, error) {
	o, p, err := s.provider(ctx, org, slug)
	if err == nil && p.DeletedAt != nil {
		err = notFound("provider %s is deleted; its slug stays reserved until it is purged (DELETE ?purge=true)", quote(slug))
	}
	return o, p, err
}

// UpdateProvider applies a patch. Changing the slug changes every
// "slug/model" address, so it needs allowSlugChange and the answer carries
// a warning.
func (s *Service) UpdateProvider(ctx context.Context, org, slug string, in ProviderPatch, allowSlugChange bool) (ProviderView, error) {
	o, p, err := s.liveProvider(ctx, org, slug)
	if err != nil {
		return ProviderView{}, err
	}
	fe := fieldErrors{}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&p.Name, in.Name)
	set(&p.Kind, in.Kind)
	set(&p.BaseURL, in.BaseURL)
	set(&p.MetadataSource, in.MetadataSource)
	if in.ContextLimit != nil {
		p.ContextLimit = *in.ContextLimit
	}
	if in.Models != nil {
		p.Models = *in.Models
	}
	if in.FirstByteTimeout != nil {
		p.Settings.FirstByteTimeout = *in.FirstByteTimeout
	}
	if in.IdleTimeout != nil {
		p.Settings.IdleTimeout = *in.IdleTimeout
	}
	if in.ForwardHeaders != nil {
		p.Settings.ForwardHeaders = *in.ForwardHeaders
	}
	if in.Policy != nil {
		p.Settings.Policy = *in.Policy
	}
	if in.Prices.Set {
		p.Settings.Prices = checkPrices(fe, "prices", in.Prices.Value)
	}
	if in.Import != nil {
		p.Settings.Import = in.Import
	}
	warnings, err := changeSlug(&p.Slug, in.Slug, allowSlugChange)
	if err != nil {
		return ProviderView{}, err
	}
	checkProvider(fe, p, s.allowLinkLocal)
	if err := fe.err(); err != nil {
		return ProviderView{}, err
	}
	if err := s.committed(ctx, s.fromSlugWrite(ctx, o.ID, p.Slug, s.st.UpdateProvider(ctx, p), "provider")); err != nil {
		return ProviderView{}, err
	}
	fresh, err := s.st.GetProvider(ctx, o.ID, p.Slug)
	if err != nil {
		return ProviderView{}, fromStore(err, "provider")
	}
	v := s.providerView(*fresh)
	v.Warnings = warnings
	return v, nil
}

// DeleteProvider soft-deletes a provider: the slug stays reserved and the
// provider leaves routing. With purge it removes the provider and frees
// the slug, unless a key's allowlist names the slug (ErrConflict,
// CodeSlugInAllowlist, listing the keys); force purges anyway and removes
// those entries in the same transaction (design 000 §3).
func (s *Service) DeleteProvider(ctx context.Context, org, slug string, purge, force bool) error {
	_, p, err := s.provider(ctx, org, slug)
	if err != nil {
		return err
	}
	switch {
	case purge:
		var refs []store.AllowlistRef
		refs, err = s.st.PurgeProvider(ctx, p.ID, force)
		s.logAllowlistEdits(org, "provider", p.Slug, refs)
	case p.DeletedAt != nil:
		err = notFound("provider %s is already deleted; purge it with ?purge=true to free the slug", quote(p.Slug))
	default:
		err = s.st.SoftDeleteProvider(ctx, p.ID, s.now())
	}
	return s.committed(ctx, fromPurge(err, "provider", p.Slug))
}

// AddProviderKey adds an upstream credential to a live provider.
func (s *Service) AddProviderKey(ctx context.Context, org, slug string, in KeyInput) (KeyView, error) {
	_, p, err := s.liveProvider(ctx, org, slug)
	if err != nil {
		return KeyView{}, err
	}
	fe := fieldErrors{}
	if in.Secret.IsZero() {
		fe.add("secret", "is required")
	}
	checkKeyRef(fe, "ref", in.Ref)
	if len(p.Keys) >= MaxTargets {
		fe.add("secret", "the pool already holds %d keys, the most a provider may have; remove one first", len(p.Keys))
	}
	k := &store.ProviderKey{ProviderID: p.ID, Secret: in.Secret, Weight: checkWeight(fe, "weight", in.Weight), Ref: in.Ref}
	if err := fe.err(); err != nil {
		return KeyView{}, err
	}
	if err := s.committed(ctx, fromStore(s.st.AddProviderKey(ctx, k), "provider key")); err != nil {
		return KeyView{}, err
	}
	return KeyView{ID: k.ID, Weight: k.Weight, Ref: k.Ref, CreatedAt: k.CreatedAt}, nil
}

// KeyWeightInput changes a pool key's weight.
type KeyWeightInput struct {
	Weight *int `json:"weight"`
}

// SetProviderKeyWeight changes the weight of one of a live provider's
// pool keys (0 takes it out of rotation without removing it).
func (s *Service) SetProviderKeyWeight(ctx context.Context, org, slug, id string, in KeyWeightInput) (KeyView, error) {
	_, p, err := s.liveProvider(ctx, org, slug)
	if err != nil {
		return KeyView{}, err
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return KeyView{}, notFound("provider key %s not found", quote(id))
	}
	fe := fieldErrors{}
	if in.Weight == nil {
		fe.add("weight", "is required")
	}
	w := checkWeight(fe, "weight", in.Weight)
	if err := fe.err(); err != nil {
		return KeyView{}, err
	}
	if err := s.committed(ctx, fromStore(s.st.SetProviderKeyWeight(ctx, p.ID, n, w), "provider key "+quote(id))); err != nil {
		return KeyView{}, err
	}
	for _, k := range p.Keys {
		if k.ID == n {
			return KeyView{ID: k.ID, Weight: w, Ref: k.Ref, CreatedAt: k.CreatedAt}, nil
		}
	}
	return KeyView{ID: n, Weight: w}, nil
}

// setProviderKeyRef changes the ref recorded with one of a live
// provider's pool keys (apply, when a file names a key's variable anew).
func (s *Service) setProviderKeyRef(ctx context.Context, org, slug string, id int64, ref string) error {
	_, p, err := s.liveProvider(ctx, org, slug)
	if err != nil {
		return err
	}
	fe := fieldErrors{}
	checkKeyRef(fe, "ref", ref)
	if err := fe.err(); err != nil {
		return err
	}
	return s.committed(ctx, fromStore(s.st.SetProviderKeyRef(ctx, p.ID, id, ref), "provider key "+quote(strconv.FormatInt(id, 10))))
}

// DeleteProviderKey removes one of a provider's upstream credentials.
func (s *Service) DeleteProviderKey(ctx context.Context, org, slug, id string) error {
	_, p, err := s.provider(ctx, org, slug)
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return notFound("provider key %s not found", quote(id))
	}
	return s.committed(ctx, fromStore(s.st.DeleteProviderKey(ctx, p.ID, n), "provider key"))
}
