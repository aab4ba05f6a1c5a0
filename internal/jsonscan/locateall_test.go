package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzLocateAll checks the one-scan LocateAll against LocateKey per key,
// and against encoding/json on valid documents: every span it sets is the
// one LocateKey finds, and it finds every key LocateKey finds without an
// error.
func FuzzLocateAll(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"usage":{"prompt_tokens":1},"model":"m","choices":[]}`))
	f.Add([]byte(`{"model":"m","usage":null} x`))
	keys := []string{"model", "usage", "choices"}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var spans [3][2]int
		err := LocateAll(doc, keys, spans[:])
		for k, key := range keys {
			s, e, found, kerr := LocateKey(doc, key)
			got := spans[k][0] >= 0
			if got && (!found || kerr != nil || s != spans[k][0] || e != spans[k][1]) {
				t.Fatalf("LocateAll(%q)[%s] = %v, LocateKey = %d, %d, %v, %v", doc, key, spans[k], s, e, found, kerr)
			}
			if found && kerr == nil && !got && err == nil {
				t.Fatalf("LocateAll(%q) missed %s without an error", doc, key)
			}
		}
		if !json.Valid(doc) || !isObject(doc) {
			return
		}
		if err != nil {
			t.Fatalf("LocateAll(%q) = %v, encoding/json says it is valid", doc, err)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(doc, &m) != nil {
			t.Fatal("valid object does not decode")
		}
		for k, key := range keys {
			if _, ok := m[key]; ok != (spans[k][0] >= 0) {
				t.Fatalf("LocateAll(%q)[%s] found = %v, encoding/json: %v", doc, key, spans[k][0] >= 0, ok)
			}
		}
		if spans[0][0] >= 0 {
			if vals := topLevelModels(t, doc); !bytes.Equal(doc[spans[0][0]:spans[0][1]], vals[0]) {
				t.Fatalf("LocateAll(%q) model = %q, encoding/json's first is %q", doc, doc[spans[0][0]:spans[0][1]], vals[0])
			}
		}
	})
}
