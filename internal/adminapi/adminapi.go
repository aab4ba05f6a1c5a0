// Package adminapi is rolter's management API over HTTP, /admin/v1
// (SPEC §8), on the admin domain service.
//
// A handler only decodes, calls one admin.Service method and encodes: the
// rules, the validation and the domain errors are package admin's. What is
// HTTP lives here: authentication by bearer token, routing, the token-scope
// gate on routes, JSON decoding and its refusals, query parameters, the one
// error shape and the mapping of error classes to statuses, the security
// headers, and the CSV form of the usage summary.
package adminapi

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/snapshot"
)

// Handler serves /admin/v1.
type Handler struct {
	svc *admin.Service
	log *slog.Logger
	mux *http.ServeMux
	// patterns are the registered routes, for tests that walk them all.
	patterns []string
}

// Prefix is where the admin API is mounted.
const Prefix = "/admin/v1"

// NewHandler builds the admin API. Every route requires an admin bearer
// token, checked against the snapshot (so a store outage does not lock
// operators out): svc needs one.
func NewHandler(svc *admin.Service) *Handler {
	h := &Handler{svc: svc, log: svc.Logger(), mux: http.NewServeMux()}
	h.routes()
	return h
}

type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (h *Handler) handle(pattern string, fn handlerFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	h.patterns = append(h.patterns, pattern)
	h.mux.HandleFunc(method+" "+Prefix+path, func(w http.ResponseWriter, r *http.Request) {
		if err := allowScope(r, method, path); err != nil {
			h.writeError(w, r, err)
			return
		}
		if err := fn(w, r); err != nil {
			h.writeError(w, r, err)
		}
	})
}

func (h *Handler) routes() {
	h.handle("GET /orgs", h.listOrgs)
	h.handle("POST /orgs", h.createOrg)
	h.handle("GET /orgs/{org}", h.getOrg)
	h.handle("PATCH /orgs/{org}", h.patchOrg)
	h.handle("DELETE /orgs/{org}", h.deleteOrg)

	h.handle("GET /orgs/{org}/projects", h.listProjects)
	h.handle("POST /orgs/{org}/projects", h.createProject)
	h.handle("GET /orgs/{org}/projects/{project}", h.getProject)
	h.handle("PATCH /orgs/{org}/projects/{project}", h.patchProject)
	h.handle("DELETE /orgs/{org}/projects/{project}", h.deleteProject)

	h.handle("GET /orgs/{org}/providers", h.listProviders)
	h.handle("POST /orgs/{org}/providers", h.createProvider)
	h.handle("GET /orgs/{org}/providers/{slug}", h.getProvider)
	h.handle("PATCH /orgs/{org}/providers/{slug}", h.patchProvider)
	h.handle("DELETE /orgs/{org}/providers/{slug}", h.deleteProvider)
	h.handle("GET /orgs/{org}/providers/{slug}/keys", h.listProviderKeys)
	h.handle("POST /orgs/{org}/providers/{slug}/keys", h.addProviderKey)
	h.handle("PATCH /orgs/{org}/providers/{slug}/keys/{id}", h.patchProviderKey)
	h.handle("DELETE /orgs/{org}/providers/{slug}/keys/{id}", h.deleteProviderKey)
	h.handle("GET /orgs/{org}/groups", h.listGroups)
	h.handle("POST /orgs/{org}/groups", h.createGroup)
	h.handle("GET /orgs/{org}/groups/{slug}", h.getGroup)
	h.handle("PATCH /orgs/{org}/groups/{slug}", h.patchGroup)
	h.handle("DELETE /orgs/{org}/groups/{slug}", h.deleteGroup)
	h.handle("GET /orgs/{org}/slugs/{slug}", h.checkSlug)
	h.handle("GET /orgs/{org}/usage", h.listUsage)
	h.handle("GET /orgs/{org}/usage/summary", h.usageSummary)

	h.handle("GET /orgs/{org}/hosts", h.listHosts)
	h.handle("POST /orgs/{org}/hosts", h.createHost)
	h.handle("GET /orgs/{org}/hosts/{id}", h.getHost)
	h.handle("PATCH /orgs/{org}/hosts/{id}", h.patchHost)
	h.handle("DELETE /orgs/{org}/hosts/{id}", h.deleteHost)
	h.handle("POST /orgs/{org}/hosts/{id}/retire", h.retireHost)
	h.handle("POST /orgs/{org}/hosts/{id}/apply", h.applyHost)
	h.handle("GET /orgs/{org}/fleet-keys", h.listFleetKeys)
	h.handle("POST /orgs/{org}/fleet-keys", h.createFleetKey)
	h.handle("DELETE /orgs/{org}/fleet-keys/{id}", h.revokeFleetKey)

	h.handle("GET /orgs/{org}/projects/{project}/routes", h.listRoutes)
	h.handle("POST /orgs/{org}/projects/{project}/routes", h.createRoute)
	h.handle("GET /orgs/{org}/projects/{project}/routes/{model...}", h.getRoute)
	h.handle("PATCH /orgs/{org}/projects/{project}/routes/{model...}", h.patchRoute)
	h.handle("DELETE /orgs/{org}/projects/{project}/routes/{model...}", h.deleteRoute)

	h.handle("GET /orgs/{org}/projects/{project}/keys", h.listKeys)
	h.handle("POST /orgs/{org}/projects/{project}/keys", h.createKey)
	h.handle("GET /orgs/{org}/projects/{project}/keys/{id}", h.getKey)
	h.handle("PATCH /orgs/{org}/projects/{project}/keys/{id}", h.patchKey)
	h.handle("DELETE /orgs/{org}/projects/{project}/keys/{id}", h.deleteKey)

	h.handle("POST /apply", h.apply)
	h.handle("GET /export", h.export)

	h.handle("GET /tokens", h.listTokens)
	h.handle("POST /tokens", h.createToken)
	h.handle("GET /tokens/{id}", h.getToken)
	h.handle("DELETE /tokens/{id}", h.revokeToken)
}

var errUnauthorized = &admin.Error{Kind: errUnauthenticated, Code: admin.CodeUnauthorized,
	Message: "a valid admin token is required: send Authorization: Bearer <token>"}

// ServeHTTP authenticates, then dispatches. Unknown paths and methods get
// the admin error shape too.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	token, ok := secret.Bearer(r.Header.Get("Authorization"))
	var scope snapshot.AdminScope
	if ok {
		scope, ok = h.svc.Authorize(token)
	}
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="rolter-admin"`)
		h.writeError(w, r, errUnauthorized)
		return
	}
	r = r.WithContext(admin.WithScope(r.Context(), scope))
	if !acceptableBody(r) {
		h.writeError(w, r, errMediaType)
		return
	}
	_, pattern := h.mux.Handler(r)
	if pattern == "" {
		// Tell 404 from 405: a path that matches with another method.
		for _, m := range []string{"GET", "POST", "PATCH", "DELETE"} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, p := h.mux.Handler(probe); p != "" {
				w.Header().Add("Allow", m)
			}
		}
		if w.Header().Get("Allow") != "" {
			h.writeError(w, r, &admin.Error{Kind: errMethod, Code: admin.CodeMethodNotAllowed, Message: r.Method + " is not supported on this path"})
			return
		}
		h.writeError(w, r, noEndpoint(r))
		return
	}
	h.mux.ServeHTTP(w, r)
}
