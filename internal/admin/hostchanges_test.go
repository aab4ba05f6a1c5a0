package admin

import (
	"reflect"
	"testing"

	"github.com/rolter/rolter/internal/fleet"
	"github.com/rolter/rolter/internal/fleetapi"
	"github.com/rolter/rolter/internal/store"
)

// TestHostChanges: under skew, the view lists each field the restart would
// change, from the assignment recorded when the box last reported it
// current; nothing when in sync or when that assignment is unknown.
func TestHostChanges(t *testing.T) {
	recipe := func(edit func(*fleetapi.VLLM)) fleetapi.Recipe {
		v := &fleetapi.VLLM{Model: "Qwen/Qwen3-8B", Source: fleetapi.Source{Kind: "hf", Revision: "main"}, VRAMGB: 12, DiskGB: 18,
			Args: []string{"--max-model-len", "32768"}}
		if edit != nil {
			edit(v)
		}
		return fleetapi.Recipe{VLLM: v}
	}
	// host is a host whose box runs the base recipe on port 8000 (recorded
	// as applied) and whose current assignment is edited by edit.
	host := func(port int, edit func(*fleetapi.VLLM)) *store.Host {
		h := &store.Host{ID: 7, ModelName: "qwen3", Port: 8000, Recipe: recipe(nil)}
		applied := fleet.Revision(h)
		h.AppliedRevision = applied
		h.Applied = &store.AppliedAssignment{Revision: applied, Port: 8000, Recipe: recipe(nil)}
		h.Port, h.Recipe = port, recipe(edit)
		return h
	}
	for _, c := range []struct {
		name string
		h    *store.Host
		want []HostChange
	}{
		{"in sync", host(8000, nil), nil},
		{"port", host(8001, nil), []HostChange{{"port", "8000", "8001"}}},
		{"model and args", host(8000, func(v *fleetapi.VLLM) {
			v.Model = "Qwen/Qwen3-8B-FP8"
			v.Args = []string{"--max-model-len", "40960", "--chat-template", "a b"}
		}), []HostChange{{"recipe.vllm.model", "Qwen/Qwen3-8B", "Qwen/Qwen3-8B-FP8"},
			{"recipe.vllm.args", "--max-model-len 32768", `--max-model-len 40960 --chat-template "a b"`}}},
		{"source and needs", host(8000, func(v *fleetapi.VLLM) {
			v.Source = fleetapi.Source{Kind: "local", Path: "/models/q"}
			v.VRAMGB, v.DiskGB = 12.5, 18
		}), []HostChange{{"recipe.vllm.source.kind", "hf", "local"}, {"recipe.vllm.source.revision", "main", "(none)"},
			{"recipe.vllm.source.path", "(none)", "/models/q"}, {"recipe.vllm.vram_gb", "12", "12.5"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := hostChanges(c.h, fleet.Revision(c.h)); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %+v\nwant %+v", got, c.want)
			}
		})
	}
	// The box runs a revision the gateway never recorded (the recipe
	// changed before it reported): what differs is unknown, not "nothing".
	h := host(8001, nil)
	h.AppliedRevision = "0123456789abcdef"
	if got := hostChanges(h, fleet.Revision(h)); got != nil {
		t.Fatalf("unknown applied assignment: %+v", got)
	}
	// Never reported: no skew, nothing pending.
	h = host(8001, nil)
	h.AppliedRevision, h.Applied = "", nil
	if got := hostChanges(h, fleet.Revision(h)); got != nil {
		t.Fatalf("never reported: %+v", got)
	}
}
