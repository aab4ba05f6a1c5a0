package store

import (
	"time"

	"github.com/rolter/rolter/internal/money"
)

// Org is the tenant boundary.
type Org struct {
	ID          int64
	Name        string
	Description string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Project groups routes and virtual keys inside an org.
type Project struct {
	ID          int64
	OrgID       int64
	Name        string
	Description string
	Budget      Budget
	// RPMLimit and TPMLimit bound the requests and tokens per minute of all
	// the project's keys together; 0: no limit.
	RPMLimit  int
	TPMLimit  int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Budget caps what a key or a project may spend per UTC calendar period.
// Period "" means no budget; an Amount of 0 with a period blocks every
// priced request.
type Budget struct {
	Amount money.Amount `json:"amount"`
	Period string       `json:"period"` // "day", "week" or "month"
}

// Budget periods.
const (
	PeriodDay   = "day"
	PeriodWeek  = "week"
	PeriodMonth = "month"
)
