package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/rolter/rolter/internal/store"
)

// providerDialog is the inline add-provider form: the Providers page's own
// fields (its "provider-fields" template, rendered from that page's set so
// that both forms are one), and the optional first pool key.
type providerDialog struct {
	Fields    template.HTML
	Err       *formErr
	KeyWeight string
}

func newProviderForm() providerForm {
	return providerForm{Kind: store.KindVLLM, MetadataSource: store.MetadataConfigured, KeyWeight: "1"}
}

// providerDialog renders the provider fields as typed, with err beside
// them.
func (u *UI) providerDialog(v *view, form providerForm, err *formErr) (providerDialog, error) {
	pv := *v
	pv.Page = "providers"
	d := newProvidersPage("new")
	d.Form, d.Err = form, err
	pv.Data = d
	var b bytes.Buffer
	if err := u.tmpl.pages["providers"].ExecuteTemplate(&b, "provider-fields", &pv); err != nil {
		return providerDialog{}, fmt.Errorf("ui: provider fields: %w", err)
	}
	// html/template escaped every value in it as it rendered.
	return providerDialog{Fields: template.HTML(b.String()), Err: err, KeyWeight: form.KeyWeight}, nil //nolint:gosec // G203: the output of html/template
}

// providerCreated is the event the dialog's answer raises (HX-Trigger):
// app.js adds the provider to every picker, picks it in the row that
// opened the dialog, closes the dialog, and the row then asks for its
// models.
type providerCreated struct {
	Slug  string `json:"slug"`
	Label string `json:"label"`
}

// routeNewProvider creates a provider from the editor's dialog. It answers
// with the dialog's form: as typed with the errors beside the fields (200,
// so htmx swaps it in), or empty again after a create, with the event
// that picks the new provider.
func (u *UI) routeNewProvider(w http.ResponseWriter, r *request) error {
	v, err := u.newView(r, "routes", false)
	if err != nil {
		return err
	}
	form := readProviderForm(r)
	in, fe := form.createInput(r)
	var ferr *formErr
	if len(fe) > 0 {
		ferr = fieldsErr(fe)
	} else {
		p, err := u.svc.CreateProvider(r.Context(), v.Org, in)
		if e, ok := asFormErr(err); ok {
			ferr = e
		} else if err != nil {
			return err
		}
		if ferr == nil {
			if !isHTMX(r) {
				seeOther(w, r, providerLink(v, p.Slug, "done", "created"))
				return nil
			}
			ev, err := json.Marshal(map[string]providerCreated{"provider-created": {Slug: p.Slug, Label: optionLabel(p.Slug, p.Name)}})
			if err != nil {
				return err
			}
			w.Header().Set("HX-Trigger", asciiJSON(ev))
			form = newProviderForm()
		}
	}
	d := &routesPage{}
	if d.Dialog, err = u.providerDialog(v, form, ferr); err != nil {
		return err
	}
	v.Data = d
	u.render(w, http.StatusOK, v, "provider-dialog-form")
	return nil
}

// asciiJSON escapes every non-ASCII character of a JSON text as \uXXXX:
// a browser reads a response header's bytes as Latin-1, so a name in UTF-8
// would arrive garbled.
func asciiJSON(b []byte) string {
	var out strings.Builder
	for _, r := range string(b) {
		switch {
		case r < utf8.RuneSelf:
			out.WriteRune(r)
		case r > 0xFFFF:
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&out, "\\u%04x\\u%04x", hi, lo)
		default:
			fmt.Fprintf(&out, "\\u%04x", r)
		}
	}
	return out.String()
}
