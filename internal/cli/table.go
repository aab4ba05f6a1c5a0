package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"
)

// column is one column of a list's table: its header and how a row's
// cell is read from the resource (decoded with json.Number numbers).
type column struct {
	header string
	value  func(m map[string]any) string
}

// col is the column of the value at a dotted path ("readiness.state").
func col(header, path string) column {
	return column{header: header, value: func(m map[string]any) string { return text(lookup(m, path)) }}
}

// empty is what the table shows for an absent or null value.
const empty = "-"

func newTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// writeTable writes one row per item under a header row, aligned.
func writeTable(w io.Writer, items []json.RawMessage, cols []column) error {
	tw := newTabWriter(w)
	heads := make([]string, len(cols))
	for i, c := range cols {
		heads[i] = c.header
	}
	fmt.Fprintln(tw, strings.Join(heads, "\t"))
	for _, raw := range items {
		m, err := decodeObject(raw)
		if err != nil {
			return err
		}
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = cell(c.value(m))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// cell keeps a value on one line of its column.
func cell(s string) string {
	if s == "" {
		return empty
	}
	return strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
}

// decodeObject decodes one JSON object, numbers as json.Number.
func decodeObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, &ConnError{Msg: "the answer is not a JSON object", Err: err}
	}
	return m, nil
}

// writeDetail writes one resource (a JSON object parsed as a YAML node,
// which keeps the API's key order) as aligned "field value" lines, nested
// values flattened to dotted paths: policy.max_output_tokens,
// keys[0].weight.
func writeDetail(w io.Writer, obj *yaml.Node) error {
	tw := newTabWriter(w)
	for i := 0; i+1 < len(obj.Content); i += 2 {
		flatten(tw, obj.Content[i].Value, obj.Content[i+1])
	}
	return tw.Flush()
}

func flatten(w io.Writer, path string, n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		if len(n.Content) == 0 {
			fmt.Fprintf(w, "%s\t%s\n", path, empty)
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			flatten(w, path+"."+n.Content[i].Value, n.Content[i+1])
		}
	case yaml.SequenceNode:
		if !scalars(n.Content) {
			for i, e := range n.Content {
				flatten(w, fmt.Sprintf("%s[%d]", path, i), e)
			}
			return
		}
		parts := make([]string, len(n.Content))
		for i, e := range n.Content {
			parts[i] = scalarText(e)
		}
		fmt.Fprintf(w, "%s\t%s\n", path, cell(strings.Join(parts, ",")))
	default:
		fmt.Fprintf(w, "%s\t%s\n", path, cell(scalarText(n)))
	}
}

func scalars(ns []*yaml.Node) bool {
	for _, n := range ns {
		if n.Kind != yaml.ScalarNode {
			return false
		}
	}
	return true
}

// scalarText is a scalar's cell: its literal, a timestamp shortened.
func scalarText(n *yaml.Node) string {
	switch n.Tag {
	case "!!null":
		return ""
	case "!!str":
		return timeText(n.Value)
	}
	return n.Value
}

// lookup returns the value at a dotted path, nil when absent.
func lookup(m map[string]any, path string) any {
	var v any = m
	for _, p := range strings.Split(path, ".") {
		o, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = o[p]
	}
	return v
}

// text renders a value for a table cell: timestamps in UTC to the
// second, lists comma-separated, objects as compact JSON.
func text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return timeText(x)
	case json.Number:
		return x.String()
	case bool:
		if x {
			return "true"
		}
		return "false"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = text(e)
		}
		return strings.Join(parts, ",")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// timeText shortens an RFC 3339 timestamp to the second, in UTC, so that
// a column of them has one width; anything else is returned as is.
func timeText(s string) string {
	if len(s) < 20 || s[10] != 'T' {
		return s
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format("2006-01-02T15:04:05Z")
}
