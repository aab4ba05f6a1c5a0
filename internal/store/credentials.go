package store

import (
	"time"

	"github.com/rolter/rolter/internal/secret"
)

// VirtualKey is a client credential of a project. Only its hash is stored.
type VirtualKey struct {
	ID        int64
	ProjectID int64
	Name      string
	Lookup    string // public part of the token that finds this row
	Hash      secret.Hash
	Models    []string // allowlist; empty: every model
	RPMLimit  int
	TPMLimit  int
	Budget    Budget
	ExpiresAt *time.Time
	RevokedAt *time.Time
	CreatedAt time.Time
}

// AdminToken guards the admin API. Only its hash is stored.
type AdminToken struct {
	ID   int64
	Name string
	Hash secret.Hash
	// OrgID is the one org the token may manage; 0: global. OrgName is
	// filled on read.
	OrgID   int64
	OrgName string
	// Lookup is the public part of a minted token; "" for the env token.
	Lookup string
	// Source is AdminTokenAPI, AdminTokenFirstStart or AdminTokenEnv.
	Source    string
	ExpiresAt *time.Time
	RevokedAt *time.Time
	CreatedAt time.Time
}

// Where an admin token came from.
const (
	AdminTokenAPI        = "api"         // POST /admin/v1/tokens
	AdminTokenFirstStart = "first_start" // generated and printed on first start
	AdminTokenEnv        = "env"         // ROLTER_ADMIN_TOKEN; see SetEnvAdminToken
)
