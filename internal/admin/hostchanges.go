package admin

import (
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/store"
)

// HostChange is one field in which a host's current assignment differs
// from the one its box runs: what a restart onto the current revision
// (apply) would change (design 002: "applied rev 3, current rev 5").
type HostChange struct {
	// Field is the host's field as the API names it: "port",
	// "recipe.vllm.model", "recipe.vllm.source.kind", "recipe.vllm.args"...
	Field string `json:"field"`
	// Applied is the value the box runs, Current the one it will run;
	// "(none)" for an absent value.
	Applied string `json:"applied"`
	Current string `json:"current"`
}

// hostChanges lists what h's current assignment changes from the one its
// box runs. It is nil when nothing is pending, and also when the box runs
// a revision whose assignment was never recorded (the gateway records one
// only when a box reports it current): then what differs is unknown.
func hostChanges(h *store.Host, rev string) []HostChange {
	a := h.Applied
	if h.AppliedRevision == "" || h.AppliedRevision == rev || a == nil || a.Revision != h.AppliedRevision {
		return nil
	}
	var out []HostChange
	add := func(field, applied, current string) {
		if applied == current {
			return
		}
		out = append(out, HostChange{Field: field, Applied: orNone(applied), Current: orNone(current)})
	}
	add("port", strconv.Itoa(a.Port), strconv.Itoa(h.Port))
	was, now := a.Recipe.VLLM, h.Recipe.VLLM
	if was == nil || now == nil {
		add("recipe.vllm", present(was != nil), present(now != nil))
		return out
	}
	num := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	add("recipe.vllm.model", was.Model, now.Model)
	for _, f := range []struct {
		name     string
		was, now string
	}{
		{"kind", was.Source.Kind, now.Source.Kind}, {"repo", was.Source.Repo, now.Source.Repo},
		{"revision", was.Source.Revision, now.Source.Revision}, {"url", was.Source.URL, now.Source.URL},
		{"ref", was.Source.Ref, now.Source.Ref}, {"path", was.Source.Path, now.Source.Path},
	} {
		add("recipe.vllm.source."+f.name, f.was, f.now)
	}
	add("recipe.vllm.vram_gb", num(was.VRAMGB), num(now.VRAMGB))
	add("recipe.vllm.disk_gb", num(was.DiskGB), num(now.DiskGB))
	add("recipe.vllm.args", argsText(was.Args), argsText(now.Args))
	add("recipe.vllm.kv_cache", orNone(was.KVCache), orNone(now.KVCache))
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func present(ok bool) string {
	if ok {
		return "(set)"
	}
	return ""
}

// argsText shows args as one line, quoting an argument that holds a space
// so that the line reads back as the same list.
func argsText(args []string) string {
	parts := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"") {
			a = strconv.Quote(a)
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}
