package gateway

import (
	"encoding/json"
	"net/http"
	"sort"
	"time"
)

type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// listModels answers GET /v1/models with the routes of the key's project
// that have a serving target, filtered by the key's allowlist.
func (g *Gateway) listModels(w http.ResponseWriter, r *http.Request) {
	t := g.table.Load()
	key, ok := authenticate(t.snap, r, time.Now())
	if !ok {
		writeError(w, errUnauthorized)
		return
	}
	data := []modelEntry{}
	for name, rt := range key.Project.Routes {
		if plan := t.routes[rt]; plan == nil || len(plan.targets) == 0 || !allowed(key, name) {
			continue
		}
		data = append(data, modelEntry{ID: name, Object: "model", Created: rt.CreatedAt.Unix(), OwnedBy: "rolter"})
	}
	sort.Slice(data, func(i, j int) bool { return data[i].ID < data[j].ID })
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
}
