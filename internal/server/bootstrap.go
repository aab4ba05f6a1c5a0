package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/rolter/rolter/internal/admin"
	"github.com/rolter/rolter/internal/secret"
	"github.com/rolter/rolter/internal/store"
)

// Names created on first start.
const (
	DefaultOrg     = "default"
	DefaultProject = "default"
)

// bootstrap prepares a store for serving. First start is "no admin token
// stored yet": it creates the default org and project and a first virtual
// key, then stores the admin token last, as the commit point, and prints the
// secrets once. Later starts only make sure ROLTER_ADMIN_TOKEN, if set, is
// accepted; they never mint anything.
func bootstrap(ctx context.Context, st store.Store, svc *admin.Service, envToken secret.Secret, out io.Writer) error {
	n, err := st.CountAdminTokens(ctx)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	if n > 0 {
		if envToken.IsZero() {
			return nil
		}
		err := st.CreateAdminToken(ctx, &store.AdminToken{Name: "ROLTER_ADMIN_TOKEN", Hash: secret.HashOf(envToken.Reveal())})
		var ce *store.ConflictError
		if err != nil && !errors.As(err, &ce) { // already stored: fine
			return fmt.Errorf("bootstrap: store ROLTER_ADMIN_TOKEN: %w", err)
		}
		return nil
	}

	if _, err := svc.CreateOrg(ctx, admin.OrgInput{Name: DefaultOrg, Description: "created on first start"}); err != nil && !isConflict(err) {
		return fmt.Errorf("bootstrap: default org: %w", err)
	}
	if _, err := svc.CreateProject(ctx, DefaultOrg, admin.ProjectInput{Name: DefaultProject, Description: "created on first start"}); err != nil && !isConflict(err) {
		return fmt.Errorf("bootstrap: default project: %w", err)
	}
	key, err := svc.CreateVirtualKey(ctx, DefaultOrg, DefaultProject, admin.VirtualKeyInput{Name: "first key"})
	if err != nil {
		return fmt.Errorf("bootstrap: first virtual key: %w", err)
	}
	token, name := envToken, "ROLTER_ADMIN_TOKEN"
	if token.IsZero() {
		token, _ = secret.Mint(secret.PrefixAdminToken)
		name = "bootstrap"
	}
	if err := st.CreateAdminToken(ctx, &store.AdminToken{Name: name, Hash: secret.HashOf(token.Reveal())}); err != nil {
		return fmt.Errorf("bootstrap: admin token: %w", err)
	}

	// The one place these secrets are shown. Deliberately not the logger:
	// logs are collected and kept; this is a console banner.
	fmt.Fprintln(out, "rolter: first start. Store these secrets now; they are not shown again.")
	if envToken.IsZero() {
		fmt.Fprintf(out, "  admin token:  %s\n", token.Reveal())
	} else {
		fmt.Fprintln(out, "  admin token:  the value of ROLTER_ADMIN_TOKEN")
	}
	fmt.Fprintf(out, "  virtual key:  %s  (org %q, project %q)\n", key.Secret, DefaultOrg, DefaultProject)
	return nil
}

func isConflict(err error) bool {
	var ae *admin.Error
	return errors.As(err, &ae) && ae.Status == http.StatusConflict
}
