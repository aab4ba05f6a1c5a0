package admin

import (
	"time"

	"github.com/rolter/rolter/internal/readiness"
)

// Readiness is the live state of providers (package readiness).
type Readiness interface {
	Status(providerID int64) (readiness.Status, bool)
}

// SetReadiness lets provider views show live readiness and discovered
// metadata. Without it they show none.
func (s *Service) SetReadiness(r Readiness) { s.ready = r }

// ReadinessView is a provider's live state as the API shows it.
type ReadinessView struct {
	State      string   `json:"state"` // "ready" or "not_ready"
	Reason     string   `json:"reason,omitempty"`
	ModelID    string   `json:"model_id,omitempty"`
	Context    int      `json:"context,omitempty"`
	Modalities []string `json:"modalities,omitempty"`
	Slots      int      `json:"slots,omitempty"`
	Build      string   `json:"build,omitempty"`
	// Quantization is the served model's file type ("Q4_K_M"), as
	// llama.cpp reports it; omitted when unknown.
	Quantization string     `json:"quantization,omitempty"`
	LastProbe    *time.Time `json:"last_probe,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
	// StaleModels are the models the upstream answered it does not serve,
	// with why; their targets are out of routing until a probe lists them.
	StaleModels map[string]string `json:"stale_models,omitempty"`
}

func (s *Service) readiness(id int64) *ReadinessView {
	if s.ready == nil {
		return nil
	}
	st, ok := s.ready.Status(id)
	if !ok {
		return nil
	}
	v := &ReadinessView{State: "not_ready", Reason: st.Reason, ModelID: st.Facts.ModelID, Context: st.Facts.Context,
		Modalities: st.Facts.Modalities, Slots: st.Facts.Slots, Build: st.Facts.Build, Quantization: st.Facts.Quantization, LastError: st.LastError,
		StaleModels: st.Stale}
	if st.Ready {
		v.State = "ready"
	}
	if !st.LastProbe.IsZero() {
		t := st.LastProbe
		v.LastProbe = &t
	}
	return v
}
