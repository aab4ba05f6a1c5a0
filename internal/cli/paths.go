package cli

import (
	"net/url"
)

// Paths of the admin API resources under /admin/v1, escaped, for Do and
// List. Every name is escaped as one path segment: a route model such as
// team/qwen3 is sent as team%2Fqwen3, which the API reads as one name.

func seg(s string) string { return "/" + url.PathEscape(s) }

// OrgsPath is the collection of orgs; OrgPath one org.
func OrgsPath() string          { return "/orgs" }
func OrgPath(org string) string { return "/orgs" + seg(org) }

// ProjectsPath is an org's projects; ProjectPath one of them.
func ProjectsPath(org string) string { return OrgPath(org) + "/projects" }
func ProjectPath(org, project string) string {
	return ProjectsPath(org) + seg(project)
}

// ProvidersPath is an org's providers; ProviderPath one, by slug.
func ProvidersPath(org string) string      { return OrgPath(org) + "/providers" }
func ProviderPath(org, slug string) string { return ProvidersPath(org) + seg(slug) }

// ProviderKeysPath is a provider's pool of upstream keys.
func ProviderKeysPath(org, slug string) string { return ProviderPath(org, slug) + "/keys" }

// GroupsPath is an org's provider groups; GroupPath one, by slug.
func GroupsPath(org string) string      { return OrgPath(org) + "/groups" }
func GroupPath(org, slug string) string { return GroupsPath(org) + seg(slug) }

// SlugPath checks whether a slug is free in an org.
func SlugPath(org, slug string) string { return OrgPath(org) + "/slugs" + seg(slug) }

// RoutesPath is a project's routes; RoutePath one, by model.
func RoutesPath(org, project string) string { return ProjectPath(org, project) + "/routes" }
func RoutePath(org, project, model string) string {
	return RoutesPath(org, project) + seg(model)
}

// KeysPath is a project's virtual keys; KeyPath one, by id.
func KeysPath(org, project string) string { return ProjectPath(org, project) + "/keys" }
func KeyPath(org, project, id string) string {
	return KeysPath(org, project) + seg(id)
}

// HostsPath is an org's fleet hosts; HostPath one, by id.
func HostsPath(org string) string    { return OrgPath(org) + "/hosts" }
func HostPath(org, id string) string { return HostsPath(org) + seg(id) }

// FleetKeysPath is an org's fleet keys; FleetKeyPath one, by id.
func FleetKeysPath(org string) string    { return OrgPath(org) + "/fleet-keys" }
func FleetKeyPath(org, id string) string { return FleetKeysPath(org) + seg(id) }

// UsagePath lists an org's usage records; UsageSummaryPath sums them.
func UsagePath(org string) string        { return OrgPath(org) + "/usage" }
func UsageSummaryPath(org string) string { return UsagePath(org) + "/summary" }

// TokensPath is the admin tokens (global tokens only); TokenPath one.
func TokensPath() string         { return "/tokens" }
func TokenPath(id string) string { return TokensPath() + seg(id) }

// ApplyPath applies a desired state (the config file); ExportPath reads
// the current one.
func ApplyPath() string  { return "/apply" }
func ExportPath() string { return "/export" }
