package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/secret"
)

// Names created on first start.
const (
	DefaultOrg     = "default"
	DefaultProject = "default"
)

// MinAdminTokenLen is the shortest ROLTER_ADMIN_TOKEN a start accepts: it
// guards every org, so it must not be guessable. (A generated token has 48
// characters.)
const MinAdminTokenLen = 24

// checkAdminToken refuses a ROLTER_ADMIN_TOKEN that is too short. The
// message names the variable and the rule, never the value.
func checkAdminToken(tok secret.Secret) error {
	if n := len(tok.Reveal()); n > 0 && n < MinAdminTokenLen {
		return fmt.Errorf("ROLTER_ADMIN_TOKEN is %d characters; it must be at least %d (e.g. openssl rand -hex 24)", n, MinAdminTokenLen)
	}
	return nil
}

// bootstrap prepares a store for serving. First start is "no admin token
// stored yet", revoked ones included: it creates the default org and
// project and a first virtual key, then stores the admin token last, as the
// commit point, and prints the secrets once.
//
// Every start then makes ROLTER_ADMIN_TOKEN the bootstrap token: a global
// token valid only while a start sets it. Its hash is stored (so that other
// replicas accept it too and the token list shows it), and any other value
// it had before is revoked; unset, every earlier value is revoked. The
// generated first-start token is an ordinary global token: it stays valid
// until revoked through the API.
//
// It reports whether this was the first start, whose banner it printed.
func bootstrap(ctx context.Context, svc *admin.Service, envToken secret.Secret, out io.Writer) (first bool, _ error) {
	first, err := svc.NeverHadAdminToken(ctx)
	if err != nil {
		return false, fmt.Errorf("bootstrap: %w", err)
	}
	var banner string
	if first {
		if banner, err = firstStart(ctx, svc, envToken); err != nil {
			return false, err
		}
	}
	var ae *admin.Error
	err = svc.SetEnvAdminToken(ctx, envToken)
	if errors.As(err, &ae) && ae.Code == admin.CodeEnvTokenClash {
		return false, errors.New("bootstrap: " + ae.Message)
	}
	if err != nil {
		return false, fmt.Errorf("bootstrap: store ROLTER_ADMIN_TOKEN: %w", err)
	}
	// The one place these secrets are shown, once they are stored.
	// Deliberately not the logger: logs are collected and kept; this is a
	// console banner.
	_, _ = io.WriteString(out, banner)
	return first, nil
}

// firstStart mints what a new store needs and returns the banner that
// shows its secrets. With ROLTER_ADMIN_TOKEN set, storing it (in
// bootstrap) is the commit point; otherwise the generated token is.
func firstStart(ctx context.Context, svc *admin.Service, envToken secret.Secret) (string, error) {
	if _, err := svc.CreateOrg(ctx, admin.OrgInput{Name: DefaultOrg, Description: "created on first start"}); err != nil && !admin.AlreadyExists(err) {
		return "", fmt.Errorf("bootstrap: default org: %w", err)
	}
	if _, err := svc.CreateProject(ctx, DefaultOrg, admin.ProjectInput{Name: DefaultProject, Description: "created on first start"}); err != nil && !admin.AlreadyExists(err) {
		return "", fmt.Errorf("bootstrap: default project: %w", err)
	}
	key, err := svc.CreateVirtualKey(ctx, DefaultOrg, DefaultProject, admin.VirtualKeyInput{Name: "first key"})
	if err != nil {
		return "", fmt.Errorf("bootstrap: first virtual key: %w", err)
	}
	var token secret.Secret
	if envToken.IsZero() {
		if token, err = svc.MintFirstStartToken(ctx); err != nil {
			return "", fmt.Errorf("bootstrap: admin token: %w", err)
		}
	}
	var b strings.Builder
	b.WriteString("rolter: first start. Store these secrets now; they are not shown again.\n")
	if envToken.IsZero() {
		fmt.Fprintf(&b, "  admin token:  %s\n", token.Reveal())
	} else {
		b.WriteString("  admin token:  the value of ROLTER_ADMIN_TOKEN\n")
	}
	fmt.Fprintf(&b, "  virtual key:  %s  (org %q, project %q)\n", key.Secret, DefaultOrg, DefaultProject)
	return b.String(), nil
}
