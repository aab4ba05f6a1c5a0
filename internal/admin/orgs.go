package admin

import (
	"context"
	"regexp"
	"time"

	"github.com/rolter/rolter/internal/store"
)

// namePattern is the shape of org and project names: they appear in URLs.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

const nameRule = "must be 1-63 characters of letters, digits, '.', '_' or '-', starting with a letter or digit"

// OrgInput creates an org.
type OrgInput struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// ProjectInput creates a project.
type ProjectInput struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Budget caps the spend of all the project's keys together per
	// period; absent: none.
	Budget *BudgetInput `json:"budget,omitempty"`
	// RPMLimit and TPMLimit bound all of the project's keys together (0:
	// no limit).
	RPMLimit int `json:"rpm_limit,omitempty"`
	TPMLimit int `json:"tpm_limit,omitempty"`
}

// ProjectPatch changes a project; absent fields stay, a null budget
// removes it.
type ProjectPatch struct {
	Name        *string               `json:"name"`
	Description *string               `json:"description"`
	Budget      nullable[BudgetInput] `json:"budget"`
	RPMLimit    *int                  `json:"rpm_limit"`
	TPMLimit    *int                  `json:"tpm_limit"`
}

// OrgPatch changes an org; absent fields stay.
type OrgPatch struct {
	Name        *string `json:"name"`
	Description *string `json:"description"`
}

// OrgView is an org as the API shows it.
type OrgView struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func orgView(o store.Org) OrgView {
	return OrgView{Name: o.Name, Description: o.Description, CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt}
}

func checkName(fe fieldErrors, field, v string) {
	if !namePattern.MatchString(v) {
		fe.add(field, nameRule)
	}
}

// CreateOrg creates an org.
func (s *Service) CreateOrg(ctx context.Context, in OrgInput) (OrgView, error) {
	if err := requireGlobal(ctx, "org creation"); err != nil {
		return OrgView{}, err
	}
	fe := fieldErrors{}
	checkName(fe, "name", in.Name)
	if err := fe.err(); err != nil {
		return OrgView{}, err
	}
	o := &store.Org{Name: in.Name, Description: in.Description}
	if err := s.committed(ctx, fromStore(s.st.CreateOrg(ctx, o), "org")); err != nil {
		return OrgView{}, err
	}
	return orgView(*o), nil
}

// org finds an org by name or returns ErrNotFound naming it.
func (s *Service) org(ctx context.Context, name string) (*store.Org, error) {
	if err := CheckOrgScope(ctx, name); err != nil {
		return nil, err
	}
	o, err := s.st.GetOrg(ctx, name)
	if err != nil {
		return nil, fromStore(err, "org "+quote(name))
	}
	if err := checkOrgID(ctx, o); err != nil {
		return nil, err
	}
	return o, nil
}

func (s *Service) project(ctx context.Context, org, name string) (*store.Org, *store.Project, error) {
	return inOrg(ctx, s, org, "project", name, s.st.GetProject)
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return `"` + s + `"`
}

// CreateProject creates a project in org.
func (s *Service) CreateProject(ctx context.Context, org string, in ProjectInput) (ProjectView, error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return ProjectView{}, err
	}
	fe := fieldErrors{}
	checkName(fe, "name", in.Name)
	checkRateLimit(fe, "rpm_limit", in.RPMLimit)
	checkRateLimit(fe, "tpm_limit", in.TPMLimit)
	budget := checkBudget(fe, "budget", in.Budget)
	if err := fe.err(); err != nil {
		return ProjectView{}, err
	}
	p := &store.Project{OrgID: o.ID, Name: in.Name, Description: in.Description, RPMLimit: in.RPMLimit, TPMLimit: in.TPMLimit, Budget: budget}
	if err := s.committed(ctx, fromStore(s.st.CreateProject(ctx, p), "project")); err != nil {
		return ProjectView{}, err
	}
	return projectView(*o, *p), nil
}

// PatchOrg changes an org; absent fields stay.
func (s *Service) PatchOrg(ctx context.Context, org string, in OrgPatch) (OrgView, error) {
	o, err := s.org(ctx, org)
	if err != nil {
		return OrgView{}, err
	}
	fe := fieldErrors{}
	if in.Name != nil {
		checkName(fe, "name", *in.Name)
		o.Name = *in.Name
	}
	if in.Description != nil {
		o.Description = *in.Description
	}
	if err := fe.err(); err != nil {
		return OrgView{}, err
	}
	if err := s.committed(ctx, fromStore(s.st.UpdateOrg(ctx, o), "org")); err != nil {
		return OrgView{}, err
	}
	return orgView(*o), nil
}

// DeleteOrg deletes an org that holds nothing any more.
func (s *Service) DeleteOrg(ctx context.Context, org string) error {
	o, err := s.org(ctx, org)
	if err != nil {
		return err
	}
	return s.committed(ctx, fromStore(s.st.DeleteOrg(ctx, o.ID), "org "+quote(o.Name)))
}

// PatchProject changes a project; absent fields stay, a null budget
// removes it.
func (s *Service) PatchProject(ctx context.Context, org, project string, in ProjectPatch) (ProjectView, error) {
	o, p, err := s.project(ctx, org, project)
	if err != nil {
		return ProjectView{}, err
	}
	fe := fieldErrors{}
	if in.Name != nil {
		checkName(fe, "name", *in.Name)
		p.Name = *in.Name
	}
	if in.Description != nil {
		p.Description = *in.Description
	}
	if in.Budget.Set {
		p.Budget = checkBudget(fe, "budget", in.Budget.Value)
	}
	if in.RPMLimit != nil {
		checkRateLimit(fe, "rpm_limit", *in.RPMLimit)
		p.RPMLimit = *in.RPMLimit
	}
	if in.TPMLimit != nil {
		checkRateLimit(fe, "tpm_limit", *in.TPMLimit)
		p.TPMLimit = *in.TPMLimit
	}
	if err := fe.err(); err != nil {
		return ProjectView{}, err
	}
	if err := s.committed(ctx, fromStore(s.st.UpdateProject(ctx, p), "project")); err != nil {
		return ProjectView{}, err
	}
	return projectView(*o, *p), nil
}

// DeleteProject deletes a project that holds nothing any more.
func (s *Service) DeleteProject(ctx context.Context, org, project string) error {
	_, p, err := s.project(ctx, org, project)
	if err != nil {
		return err
	}
	return s.committed(ctx, fromStore(s.st.DeleteProject(ctx, p.ID), "project "+quote(p.Name)))
}

// ProjectView is a project as the API shows it.
type ProjectView struct {
	Org         string        `json:"org"`
	Name        string        `json:"name"`
	Description string        `json:"description"`
	RPMLimit    int           `json:"rpm_limit,omitempty"`
	TPMLimit    int           `json:"tpm_limit,omitempty"`
	Budget      *store.Budget `json:"budget,omitempty"`
	CreatedAt   time.Time     `json:"created_at"`
	UpdatedAt   time.Time     `json:"updated_at"`
}

func projectView(o store.Org, p store.Project) ProjectView {
	return ProjectView{Org: o.Name, Name: p.Name, Description: p.Description, RPMLimit: p.RPMLimit, TPMLimit: p.TPMLimit,
		Budget: budgetView(p.Budget), CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt}
}
