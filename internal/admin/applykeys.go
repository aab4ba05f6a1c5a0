package admin

import (
	"context"
	"crypto/sha256"
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
	// The pool by the digest of each secret, so that a large pool is
	// matched in one pass; the digest hides the secret from the map's
	// timing.
	bySecret, byRef := poolIndex{}, poolIndex{}
	for j, h := range have {
		bySecret.add(digest(h.Secret.Reveal()), j)
		byRef.add(digest(h.Ref), j)
	}
	for i, w := range want {
		pair[i] = -1
		if w.Secret.IsZero() {
			continue
		}
		if j := bySecret.take(digest(w.Secret.Reveal()), used); j >= 0 {
			pair[i] = j
		}
	}
	var unknown []string
	for i, w := range want {
		if !w.Secret.IsZero() || !a.opt.DryRun {
			continue
		}
		if w.Ref != "" {
			if j := byRef.take(digest(w.Ref), used); j >= 0 {
				pair[i] = j
				c.Notes = append(c.Notes, fmt.Sprintf("keys[%s]: no secret given; taken to be the pool key recorded with this ref", keyLabel(i, w)))
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

// poolIndex is a pool's keys (their indexes, in order) by a digest.
type poolIndex map[[sha256.Size]byte][]int

func (p poolIndex) add(d [sha256.Size]byte, j int) { p[d] = append(p[d], j) }

// take marks and returns the first key under d that used lacks; -1 when
// none.
func (p poolIndex) take(d [sha256.Size]byte, used []bool) int {
	list := p[d]
	for len(list) > 0 && used[list[0]] {
		list = list[1:]
	}
	if len(list) == 0 {
		delete(p, d)
		return -1
	}
	j := list[0]
	used[j], p[d] = true, list[1:]
	return j
}

func digest(s string) [sha256.Size]byte { return sha256.Sum256([]byte(s)) }

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
