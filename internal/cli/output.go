package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"go.yaml.in/yaml/v3"
)

// Output formats, chosen with -o.
const (
	formatTable = "table" // aligned columns for people (the default)
	formatJSON  = "json"  // the API's JSON, indented
	formatYAML  = "yaml"  // the same document as YAML, keys in the API's order
	formatCSV   = "csv"   // the usage summary's CSV, as the API writes it
)

func checkFormat(f string, csvOK bool) error {
	switch f {
	case formatTable, formatJSON, formatYAML:
		return nil
	case formatCSV:
		if csvOK {
			return nil
		}
		return usageErrorf("-o csv: only `usage summary` has a CSV form; use table, json or yaml")
	}
	return usageErrorf("-o %q: want table, json or yaml", f)
}

// writeJSON writes raw JSON indented, byte for byte the API's values and
// key order (no re-encoding: numbers and strings stay as sent).
func writeJSON(w io.Writer, raw []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return &ConnError{Msg: "the answer is not JSON", Err: err}
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// writeYAML writes raw JSON as block YAML. JSON is YAML, so the document
// is parsed as a YAML node tree, which keeps the key order, and printed
// with the JSON quoting and flow style dropped: a string that would read
// as another type ("123", "true") stays quoted.
func writeYAML(w io.Writer, raw []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return &ConnError{Msg: "the answer is not JSON", Err: err}
	}
	plain(&doc)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// plain resets the styles the JSON syntax gave the nodes.
func plain(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		plain(c)
	}
}

// writeList writes items in format; table uses cols.
func writeList(w io.Writer, format string, items []json.RawMessage, cols []column) error {
	switch format {
	case formatJSON, formatYAML:
		if items == nil {
			items = []json.RawMessage{}
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(items); err != nil {
			return err
		}
		if format == formatJSON {
			return writeJSON(w, buf.Bytes())
		}
		return writeYAML(w, buf.Bytes())
	}
	return writeTable(w, items, cols)
}

// writeObject writes one resource in format. secrets names the fields
// that carry a secret shown this once (a create's answer): the table form
// leaves them out of the fields and prints each on its own line after
// them, marked as shown once; json and yaml keep them where the API put
// them, since that is what a script stores.
func writeObject(w io.Writer, format string, raw json.RawMessage, secrets ...string) error {
	switch format {
	case formatJSON:
		return writeJSON(w, raw)
	case formatYAML:
		return writeYAML(w, raw)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return &ConnError{Msg: "the answer is not a JSON object", Err: err}
	}
	obj := doc.Content[0]
	var shown []string
	kept := obj.Content[:0:0]
	for i := 0; i+1 < len(obj.Content); i += 2 {
		k, v := obj.Content[i], obj.Content[i+1]
		if slices.Contains(secrets, k.Value) {
			if v.Tag == "!!str" && v.Value != "" {
				shown = append(shown, fmt.Sprintf("%s (shown once): %s", k.Value, v.Value))
			}
			continue
		}
		kept = append(kept, k, v)
	}
	obj.Content = kept
	if err := writeDetail(w, obj); err != nil {
		return err
	}
	for _, s := range shown {
		fmt.Fprintln(w, s)
	}
	return nil
}
