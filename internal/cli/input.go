package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// A request body is built from a -f file holding the API's JSON body (as
// JSON or YAML), then from the flags given, which override the file's
// top-level fields. Flags that are not given send nothing, so an update
// changes only what the command names.

// fieldKind is how a flag's value is read.
type fieldKind int

const (
	fString fieldKind = iota // --name X
	fInt                     // --rpm-limit 60
	fList                    // --models a,b or --models a --models b
	fArray                   // repeated only: --target a --target b (values may hold commas)
	fBool                    // --auto-apply
)

// field binds one flag to one field of the request body.
type field struct {
	flag string
	// key is the body field; "?name" is a query parameter instead, and
	// "" a flag the resource's hook reads itself.
	key   string
	kind  fieldKind
	usage string
	// conv turns the flag's value (string, int, []string or bool) into
	// the field's JSON value; nil sends it as is.
	conv func(a *app, v any) (any, error)
}

func (f field) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	switch f.kind {
	case fString:
		fs.String(f.flag, "", f.usage)
	case fInt:
		fs.Int(f.flag, 0, f.usage)
	case fList:
		fs.StringSlice(f.flag, nil, f.usage)
	case fArray:
		fs.StringArray(f.flag, nil, f.usage)
	case fBool:
		fs.Bool(f.flag, false, f.usage)
	}
}

func (f field) value(cmd *cobra.Command) (any, error) {
	fs := cmd.Flags()
	switch f.kind {
	case fInt:
		return fs.GetInt(f.flag)
	case fList:
		return fs.GetStringSlice(f.flag)
	case fArray:
		return fs.GetStringArray(f.flag)
	case fBool:
		return fs.GetBool(f.flag)
	}
	return fs.GetString(f.flag)
}

// registerBody adds -f and the fields' flags to a create or update command.
func registerBody(cmd *cobra.Command, fields []field) {
	cmd.Flags().StringP("file", "f", "", "read the request body (the API's JSON, as JSON or YAML) from this file; - is stdin")
	for _, f := range fields {
		f.register(cmd)
	}
}

// body builds the request body and query of a create or update command.
func (a *app) body(cmd *cobra.Command, fields []field) (map[string]any, url.Values, error) {
	body := map[string]any{}
	if path, _ := cmd.Flags().GetString("file"); path != "" {
		var err error
		if body, err = a.readBody("-f", path); err != nil {
			return nil, nil, err
		}
	}
	query := url.Values{}
	for _, f := range fields {
		if f.key == "" || !cmd.Flags().Changed(f.flag) {
			continue // not given, or read by the resource's own hook
		}
		v, err := f.value(cmd)
		if err != nil {
			return nil, nil, usageErrorf("--%s: %v", f.flag, err)
		}
		if f.conv != nil {
			if v, err = f.conv(a, v); err != nil {
				var ue *UsageError
				if errors.As(err, &ue) { // names the flag already
					return nil, nil, err
				}
				return nil, nil, usageErrorf("--%s: %v", f.flag, err)
			}
		}
		if name, ok := strings.CutPrefix(f.key, "?"); ok {
			query.Set(name, fmt.Sprint(v))
			continue
		}
		body[f.key] = v
	}
	return body, query, nil
}

// readBody reads a -f file: one JSON object, or a YAML mapping converted
// to JSON. Numbers from JSON keep their literal; prices and budgets are
// exact decimals to the API.
func (a *app) readBody(flag, path string) (map[string]any, error) {
	var (
		b   []byte
		err error
	)
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(a.env.Stdin, 1<<20+1))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usageErrorf("%s: %v", flag, err)
	}
	if len(b) > 1<<20 {
		return nil, usageErrorf("%s %s: over 1 MiB, the API's body limit", flag, path)
	}
	trimmed := bytes.TrimSpace(b)
	var m map[string]any
	if bytes.HasPrefix(trimmed, []byte("{")) {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return nil, usageErrorf("%s %s: not a JSON object: %v", flag, path, err)
		}
		return m, nil
	}
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, usageErrorf("%s %s: not JSON or YAML: %v", flag, path, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, usageErrorf("%s %s: want a mapping of the API's fields (a JSON object), e.g. name: x", flag, path)
	}
	// A YAML mapping with a non-string key (1: x) cannot be JSON.
	if _, err := json.Marshal(m); err != nil {
		return nil, usageErrorf("%s %s: %v", flag, path, err)
	}
	return m, nil
}

// envSecret reads a secret from the environment variable named by a flag,
// so that it never shows in ps or in the shell history.
func (a *app) envSecret(flag, name string) (string, error) {
	if name == "" {
		return "", usageErrorf("--%s wants the name of an environment variable", flag)
	}
	v := strings.TrimSpace(a.env.Getenv(name))
	if v == "" {
		return "", usageErrorf("--%s %s: the environment variable is not set or empty", flag, name)
	}
	return v, nil
}

// stdinSecrets reads one secret per non-empty line of standard input.
func (a *app) stdinSecrets(flag string) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(io.LimitReader(a.env.Stdin, 1<<20))
	for sc.Scan() {
		if s := strings.TrimSpace(sc.Text()); s != "" {
			out = append(out, s)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, usageErrorf("--%s: reading standard input: %v", flag, err)
	}
	if len(out) == 0 {
		return nil, usageErrorf("--%s: standard input holds no secret", flag)
	}
	return out, nil
}
