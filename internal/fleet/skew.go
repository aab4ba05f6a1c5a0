package fleet

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rolter/rolter/internal/fleetapi"
)

// Fields a Skew names.
const (
	SkewServedName  = "served_model_name"
	SkewMaxModelLen = "max_model_len"
)

// Skew is one way a box serves something other than the recipe it runs
// says (design 002, "a second kind of skew": intended launch arguments
// against what the box actually runs). The probe reads it from the served
// model card of GET /v1/models.
//
// A different served name keeps the host out of routing (Fatal): callers
// of its model_name would reach another model. A different max_model_len
// is reported only: the host is routed, and admitted on the context the
// engine enforces (the card's), which is what callers actually get; the
// operator decides whether the recipe or the box is wrong.
type Skew struct {
	// Field is SkewServedName or SkewMaxModelLen.
	Field string `json:"field"`
	// Recipe is the value the running recipe asks for; Served is the one
	// the card reports ("(none)" when it lists no model).
	Recipe string `json:"recipe"`
	Served string `json:"served"`
	// Fatal is set when the skew keeps the host out of routing.
	Fatal bool `json:"fatal"`
	// Reason says it in words, for the host view and the logs.
	Reason string `json:"reason"`
}

// servedCard is one model of a /v1/models answer.
type servedCard struct {
	ID          string
	MaxModelLen int // 0 when absent or not a positive number
}

// maxListed bounds the served names a skew reason quotes.
const maxListed = 3

// servedSkew compares recipe r with the models a box's /v1/models lists:
// the card of r's served name, and the skews found (nil when none). found
// is false when the card of r's served name is not listed.
func servedSkew(r *fleetapi.VLLM, models []servedCard) (card servedCard, skew []Skew, found bool) {
	want := r.ServedName()
	for _, m := range models {
		if m.ID == want {
			card, found = m, true
			break
		}
	}
	if !found {
		names := make([]string, 0, maxListed)
		for i, m := range models {
			if i == maxListed {
				names = append(names, fmt.Sprintf("and %d more", len(models)-maxListed))
				break
			}
			names = append(names, m.ID)
		}
		served := strings.Join(names, ", ")
		if served == "" {
			served = "(none)"
		}
		return card, []Skew{{Field: SkewServedName, Recipe: want, Served: served, Fatal: true,
			Reason: fmt.Sprintf("the box serves %s, not the recipe's %s: kept out of routing", served, want)}}, false
	}
	if flag := MaxModelLen(r); flag > 0 && card.MaxModelLen > 0 && card.MaxModelLen != flag {
		skew = append(skew, Skew{Field: SkewMaxModelLen, Recipe: strconv.Itoa(flag), Served: strconv.Itoa(card.MaxModelLen),
			Reason: fmt.Sprintf("the box serves max_model_len %d, the recipe's --max-model-len is %d: routed with the served context", card.MaxModelLen, flag)})
	}
	return card, skew, true
}

// Skew returns what the controller's last probe that read h's model card
// found served other than its running recipe says; nil when nothing (or
// before such a probe). It is as of that probe: a host that went down
// keeps the skew last seen.
func (c *Controller) Skew(id int64) []Skew {
	c.mu.Lock()
	defer c.mu.Unlock()
	if hh := c.health[id]; hh != nil {
		return hh.skew
	}
	return nil
}
