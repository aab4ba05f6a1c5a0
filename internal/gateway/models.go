package gateway

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rolter/rolter/internal/snapshot"
	"github.com/rolter/rolter/internal/store"
)

type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// AddressKind says what the id addresses: "route", "provider" (a
	// provider-slug/model pin) or "group" (group-slug/model fan-out).
	AddressKind string `json:"address_kind"`
	// ContextLength is the context admitted for the address: for a route or
	// group, the minimum of its routable members (design 002's pool rule).
	ContextLength int      `json:"context_length,omitempty"`
	Modalities    []string `json:"modalities,omitempty"`
	// Quantization is the served model's file type ("Q4_K_M") on a
	// provider-slug/model address whose upstream reports one (llama.cpp);
	// a route or group may pool several, so it names none.
	Quantization string `json:"quantization,omitempty"`
	// Policy governs the address: the strictest of its own policy (route
	// or group) and the policies of the providers that serve it, so a
	// request within it is admitted on every target.
	Policy store.Policy `json:"policy"`
}

// listModels answers GET /v1/models: the routes of the key's project that
// have a serving target, then every provider-slug/model and group-slug/model
// address of its org, all filtered by the key's allowlist.
func (g *Gateway) listModels(w http.ResponseWriter, r *http.Request) {
	t := g.table.Load()
	key, ok := authenticate(t.snap, r, time.Now())
	if !ok {
		writeError(w, errUnauthorized)
		return
	}
	data := []modelEntry{}
	for name, rt := range key.Project.Routes.All() {
		if e, ok := t.routeModel(rt); ok && allowed(key, name) {
			data = append(data, e)
		}
	}
	sort.Slice(data, func(i, j int) bool { return data[i].ID < data[j].ID })
	for _, m := range t.models.At(key.Project.Org) {
		// A route named like an address shadows it (routes win).
		if key.Project.Routes.At(m.ID) == nil && allowed(key, m.ID) {
			data = append(data, *m)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}

// getModel answers GET /v1/models/{id} (the OpenAI SDKs' models.retrieve):
// exactly the entry the list has for id, or 404 model_not_found. The id
// may hold slashes (provider-slug/model, group-slug/model), sent as they
// are or escaped as %2F. A model the key may not see is not found, like
// one that does not exist.
func (g *Gateway) getModel(w http.ResponseWriter, r *http.Request) {
	t := g.table.Load()
	key, ok := authenticate(t.snap, r, time.Now())
	if !ok {
		writeError(w, errUnauthorized)
		return
	}
	id := r.PathValue("id")
	e, ok := t.model(key, id)
	if !ok {
		writeError(w, newError(http.StatusNotFound, "model_not_found",
			"model "+quoteModel(id)+" does not exist or this key may not use it; GET /v1/models lists the models this key can use"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(e)
}

// model is the entry listModels shows key for id, by the same rules: a
// route of the key's project (listed only with a serving target) shadows
// an org address of the same name, and the key's allowlist filters both.
func (t *table) model(key *snapshot.VirtualKey, id string) (modelEntry, bool) {
	if !allowed(key, id) {
		return modelEntry{}, false
	}
	if rt := key.Project.Routes.At(id); rt != nil {
		e, ok := t.routeModel(rt)
		return e, ok
	}
	ms := t.models.At(key.Project.Org) // sorted by id (cmpModel)
	i, ok := slices.BinarySearchFunc(ms, id, func(m *modelEntry, id string) int { return strings.Compare(m.ID, id) })
	if !ok {
		return modelEntry{}, false
	}
	return *ms[i], true
}
