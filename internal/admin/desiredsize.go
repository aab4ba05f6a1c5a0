package admin

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// entryLists are the JSON lists of a Desired whose elements are entries
// (Desired.Entries), by their path of object keys from the root.
var entryLists = map[string]bool{
	"orgs": true, "orgs/providers": true, "orgs/providers/keys": true, "orgs/groups": true, "orgs/groups/members": true,
	"orgs/projects": true, "orgs/projects/routes": true, "orgs/projects/routes/targets": true, "orgs/projects/keys": true,
	"orgs/hosts": true,
}

// maxDesiredDepth bounds the nesting of a desired state's JSON: its own
// is under a dozen levels.
const maxDesiredDepth = 64

// CheckDesiredJSON refuses, before it is decoded, the JSON of a desired
// state with more than MaxApplyEntries entries (too_many_entries) or
// nested deeper than any desired state is: decoding 8 MiB of empty
// entries ({},{},...) allocates gigabytes before Apply could count
// them. It reads raw token by token, keeping nothing of it, and stops at
// the first entry over the cap. JSON it cannot read is left to the
// decoder to refuse. Keys match as the decoder matches them, ignoring
// case.
func CheckDesiredJSON(raw []byte) error {
	type frame struct {
		path    string
		object  bool
		wantKey bool   // an object's next token is a key, or its end
		key     string // an object's current key
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var stack []frame
	n := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		top := len(stack) - 1
		if top >= 0 && stack[top].object && stack[top].wantKey {
			if k, ok := tok.(string); ok {
				stack[top].key, stack[top].wantKey = strings.ToLower(k), false
				continue
			}
		}
		d, delim := tok.(json.Delim)
		if delim && (d == '}' || d == ']') {
			stack = stack[:top]
			if top > 0 && stack[top-1].object {
				stack[top-1].wantKey = true
			}
			continue
		}
		// A value starts.
		path := ""
		if top >= 0 {
			f := &stack[top]
			path = f.path
			if f.object {
				if path != "" {
					path += "/"
				}
				path += f.key
				f.wantKey = true
			} else if entryLists[path] {
				if n++; n > MaxApplyEntries {
					return tooManyEntries("more than " + strconv.Itoa(MaxApplyEntries))
				}
			}
		}
		if delim {
			if len(stack) == maxDesiredDepth {
				return &Error{Kind: ErrInvalid, Code: CodeInvalidJSON,
					Message: "the body nests deeper than " + strconv.Itoa(maxDesiredDepth) + " levels; a desired state never does"}
			}
			stack = append(stack, frame{path: path, object: d == '{', wantKey: d == '{'})
		}
	}
}
