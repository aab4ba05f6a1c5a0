package gateway

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"

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
	for name, rt := range key.Project.Routes {
		if e, ok := t.routeModels[rt]; ok && allowed(key, name) {
			data = append(data, e)
		}
	}
	sort.Slice(data, func(i, j int) bool { return data[i].ID < data[j].ID })
	for _, m := range t.models[key.Project.Org] {
		// A route named like an address shadows it (routes win).
		if key.Project.Routes[m.ID] == nil && allowed(key, m.ID) {
			data = append(data, m)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}
