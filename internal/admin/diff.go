package admin

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// FieldChange is one changed field of an entry: its path in the entry's
// API view ("targets[1].weight", "policy.max_concurrency") with the old and
// the new value as JSON; "" is absent. A pool key's change names the key
// (keys[NAME]) and says what happened in New. Never a secret.
type FieldChange struct {
	Field string `json:"field"`
	Old   string `json:"old,omitempty"`
	New   string `json:"new,omitempty"`
}

// diffViews compares two API views of one entry, field by field: their
// JSON flattened to paths, with the top-level fields keep rejects left
// out. Comparing the views the Service answers, rather than the inputs,
// leaves every default and normalisation (trimmed base URLs, canonical
// header names, exact prices) to the Service: what it stores the same way
// is the same.
func diffViews(before, after any, keep func(top string) bool) []FieldChange {
	b, a := flatten(before), flatten(after)
	paths := make([]string, 0, len(a)+len(b))
	for p := range b {
		paths = append(paths, p)
	}
	for p := range a {
		if _, ok := b[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.SortFunc(paths, naturalCompare)
	var out []FieldChange
	for _, p := range paths {
		top, _, _ := strings.Cut(p, ".")
		top, _, _ = strings.Cut(top, "[")
		if !keep(top) || b[p] == a[p] {
			continue
		}
		out = append(out, FieldChange{Field: p, Old: b[p], New: a[p]})
	}
	return out
}

// ignoring is a keep function that rejects the named fields.
func ignoring(fields ...string) func(string) bool {
	return func(top string) bool { return !slices.Contains(fields, top) }
}

// only is a keep function that accepts the named fields only.
func only(fields ...string) func(string) bool {
	return func(top string) bool { return slices.Contains(fields, top) }
}

// viewNoise are the fields of views that no file sets: times, ids, live
// state, answers-once secrets.
var viewNoise = []string{"created_at", "updated_at", "deleted_at", "readiness", "warnings", "id", "secret", "prefix", "revoked_at"}

// flatten maps a value's JSON to its leaves by path: objects join keys with
// '.', arrays index with [i]; null, empty arrays and empty objects are
// absent, as an omitted field is.
func flatten(v any) map[string]string {
	out := map[string]string{}
	raw, err := json.Marshal(v)
	if err != nil {
		return out
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var x any
	if dec.Decode(&x) != nil {
		return out
	}
	var walk func(path string, x any)
	walk = func(path string, x any) {
		switch x := x.(type) {
		case nil:
		case map[string]any:
			for k, v := range x {
				if path != "" {
					k = path + "." + k
				}
				walk(k, v)
			}
		case []any:
			for i, v := range x {
				walk(path+"["+strconv.Itoa(i)+"]", v)
			}
		default:
			b, _ := json.Marshal(x)
			out[path] = string(b)
		}
	}
	walk("", x)
	return out
}

// naturalCompare orders paths with their numbers by value, so that
// targets[2] comes before targets[10].
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitsPrefix(a), digitsPrefix(b)
		if da > 0 && db > 0 {
			na, _ := strconv.Atoi(a[:da])
			nb, _ := strconv.Atoi(b[:db])
			if na != nb {
				if na < nb {
					return -1
				}
				return 1
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			if a[0] < b[0] {
				return -1
			}
			return 1
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func digitsPrefix(s string) int {
	n := 0
	for n < len(s) && n < 9 && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}
