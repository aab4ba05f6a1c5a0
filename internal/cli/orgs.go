package cli

// orgs is `rolter orgs`: the tenants. An org-scoped token sees its own.
func orgs() *resource {
	fields := []field{
		{flag: "name", key: "name", usage: "the org's name (1-63 of letters, digits, ., _, -)"},
		{flag: "description", key: "description", usage: "free text"},
	}
	return &resource{
		name: "orgs", singular: "org", scope: scopeGlobal, id: "NAME", idField: "name",
		short:  "orgs: the tenants that hold providers, projects and hosts",
		coll:   func(*app) string { return OrgsPath() },
		item:   func(_ *app, id string) string { return OrgPath(id) },
		cols:   []column{col("NAME", "name"), col("DESCRIPTION", "description"), col("CREATED", "created_at")},
		create: fields, update: fields,
		del: deleteSpec{short: "delete an org (refused while it holds anything)", verb: "deleted"},
		examples: map[string]string{
			"create": "  rolter orgs create --name team-a",
			"update": "  rolter orgs update team-a --name team-b",
		},
	}
}

// projects is `rolter projects`: an org's projects, which hold routes and
// virtual keys.
func projects() *resource {
	fields := []field{
		{flag: "name", key: "name", usage: "the project's name"},
		{flag: "description", key: "description", usage: "free text"},
		{flag: "rpm-limit", key: "rpm_limit", kind: fInt, usage: "requests per minute of all its keys together (0: none)"},
		{flag: "tpm-limit", key: "tpm_limit", kind: fInt, usage: "tokens per minute of all its keys together (0: none)"},
		{flag: "budget", key: "budget", usage: "USD per period for all its keys, AMOUNT/PERIOD, e.g. 500/month", conv: budgetFlag},
	}
	update := append(append([]field{}, fields...),
		field{flag: "no-budget", key: "budget", kind: fBool, conv: null, usage: "remove the budget"})
	return &resource{
		name: "projects", singular: "project", scope: scopeOrg, id: "NAME", idField: "name",
		short: "projects of an org: they hold routes and virtual keys",
		coll:  func(a *app) string { return ProjectsPath(a.org) },
		item:  func(a *app, id string) string { return ProjectPath(a.org, id) },
		cols: []column{
			col("NAME", "name"), col("DESCRIPTION", "description"), col("RPM", "rpm_limit"), col("TPM", "tpm_limit"),
			{header: "BUDGET", value: budgetText}, col("CREATED", "created_at"),
		},
		create: fields, update: update,
		del: deleteSpec{short: "delete a project (refused while it has routes or keys)", verb: "deleted"},
		examples: map[string]string{
			"create": "  rolter projects create --name team-a --rpm-limit 600",
			"update": "  rolter projects update team-a --budget 500/month",
		},
	}
}

func budgetText(m map[string]any) string {
	amount := text(lookup(m, "budget.amount"))
	if amount == "" {
		return ""
	}
	return amount + "/" + text(lookup(m, "budget.period"))
}
