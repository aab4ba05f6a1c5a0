// Package resolve maps the model string a client sends to an address in
// the caller's scope (SPEC §3, design 000):
//
//  1. the whole string as a route name in the caller's project;
//  2. else, split on the FIRST "/" into L and R (R non-empty), and look L up
//     in the caller's org slug namespace: a provider slug pins that
//     provider with upstream model R; a group slug fans out over the group's
//     members with model_map[R] or R;
//  3. else, not found.
//
// Lookups are map reads in the snapshot: no scan, so the cost does not grow
// with the number of routes or slugs, and nothing outside the caller's org
// and project is ever consulted.
package resolve

import (
	"strings"

	"github.com/rolter/rolter/internal/snapshot"
)

// Kind is the kind of address a model string resolved to.
type Kind string

// Address kinds, as reported in usage records and /v1/models.
const (
	KindRoute    Kind = "route"
	KindProvider Kind = "provider"
	KindGroup    Kind = "group"
)

// Address is a resolved model string. Exactly one of Route, Provider and
// Group is set, matching Kind. Model is the right part R for provider and
// group addresses.
type Address struct {
	Kind     Kind
	Route    *snapshot.Route
	Provider *snapshot.Provider
	Group    *snapshot.Group
	Model    string
}

// Resolve resolves model in project p. ok is false when nothing matches.
func Resolve(p *snapshot.Project, model string) (a Address, ok bool) {
	if r := p.Routes.At(model); r != nil {
		return Address{Kind: KindRoute, Route: r}, true
	}
	left, right, found := strings.Cut(model, "/")
	if !found || left == "" || right == "" {
		return Address{}, false
	}
	if pv := p.Org.Providers.At(left); pv != nil {
		return Address{Kind: KindProvider, Provider: pv, Model: right}, true
	}
	if g := p.Org.Groups.At(left); g != nil {
		return Address{Kind: KindGroup, Group: g, Model: right}, true
	}
	return Address{}, false
}

// MemberModel is the model a group member receives for a request to
// "group/model": its model_map entry, else the model itself.
func MemberModel(m snapshot.Member, model string) string {
	if u, ok := m.ModelMap[model]; ok && u != "" {
		return u
	}
	return model
}
