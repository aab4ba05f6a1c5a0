package admin

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/store"
)

// keys brings the pool of provider slug (have, with secrets) to want; see
// Apply on how keys are matched.
func (a *applier) keys(ctx context.Context, s *Service, c *Change, org, slug string, have []store.ProviderKey, want []KeyInput) ([]FieldChange, error) {
	pair := make([]int, len(want)) // index in have, or -1
	used := make([]bool, len(have))
	for i, w := range want {
		pair[i] = -1
		if w.Secret.IsZero() {
			continue
		}
		for j, h := range have {
			if !used[j] && subtle.ConstantTimeCompare([]byte(h.Secret.Reveal()), []byte(w.Secret.Reveal())) == 1 {
				pair[i], used[j] = j, true
				break
			}
		}
	}
	var unknown []string
	for i, w := range want {
		if !w.Secret.IsZero() || !a.opt.DryRun {
			continue
		}
		for j, h := range have {
			if !used[j] && w.Ref != "" && h.Ref == w.Ref {
				pair[i], used[j] = j, true
				c.Notes = append(c.Notes, fmt.Sprintf("keys[%s]: no secret given; taken to be the pool key recorded with this ref", keyLabel(i, w)))
				break
			}
		}
		if pair[i] < 0 {
			unknown = append(unknown, keyLabel(i, w))
		}
	}
	var fields []FieldChange
	for i, w := range want {
		label, field := keyLabel(i, w), fmt.Sprintf("keys[%d]", i)
		if j := pair[i]; j >= 0 {
			h := have[j]
			id := strconv.FormatInt(h.ID, 10)
			if weight := checkWeight(fieldErrors{}, "", w.Weight); weight != h.Weight {
				if _, err := s.SetProviderKeyWeight(ctx, org, slug, id, KeyWeightInput{Weight: &weight}); err != nil {
					return nil, underField(err, field)
				}
				fields = append(fields, FieldChange{Field: "keys[" + label + "].weight", Old: strconv.Itoa(h.Weight), New: strconv.Itoa(weight)})
			}
			if h.Ref != w.Ref {
				if err := s.setProviderKeyRef(ctx, org, slug, h.ID, w.Ref); err != nil {
					return nil, underField(err, field)
				}
				fields = append(fields, FieldChange{Field: "keys[" + label + "].ref", Old: jsonString(h.Ref), New: jsonString(w.Ref)})
			}
			continue
		}
		if w.Secret.IsZero() && a.opt.DryRun {
			continue // unknown: neither added nor compared
		}
		k, err := s.AddProviderKey(ctx, org, slug, w)
		if err != nil {
			return nil, underField(err, field)
		}
		fields = append(fields, FieldChange{Field: "keys[" + label + "]", New: fmt.Sprintf("added, weight %d", k.Weight)})
	}
	if len(unknown) > 0 {
		c.Notes = append(c.Notes, "key pool not compared: no secret given for "+strings.Join(unknown, ", ")+
			"; an apply with the secrets may add or remove keys")
		return fields, nil
	}
	for j, h := range have {
		if used[j] {
			continue
		}
		if err := s.DeleteProviderKey(ctx, org, slug, strconv.FormatInt(h.ID, 10)); err != nil {
			return nil, err
		}
		old := fmt.Sprintf("weight %d", h.Weight)
		if h.Ref != "" {
			old = "ref " + h.Ref + ", " + old
		}
		fields = append(fields, FieldChange{Field: fmt.Sprintf("keys[id %d]", h.ID), Old: old, New: "removed"})
	}
	return fields, nil
}

// keyLabel names a key of the file in a plan: by its ref, else its index.
func keyLabel(i int, k KeyInput) string {
	if k.Ref != "" {
		return k.Ref
	}
	return strconv.Itoa(i)
}

func jsonString(s string) string {
	if s == "" {
		return ""
	}
	return strconv.Quote(s)
}

// underField puts the fields of a validation error under prefix (an
// error of a pool key's own call names "weight", the entry's "keys[0]").
func underField(err error, prefix string) error {
	var ae *Error
	if !errors.As(err, &ae) || len(ae.Fields) == 0 {
		return err
	}
	out := *ae
	out.Fields = make(map[string]string, len(ae.Fields))
	for f, msg := range ae.Fields {
		out.Fields[prefix+"."+f] = msg
	}
	return &out
}
