package store

// Changes is what changed in the routing state since a position of the
// store's change journal (issue 21): the ids of the entities written, per
// kind, and the current rows of those that still exist. An id without a
// row was deleted. Keys, targets and members change with their provider,
// route or group, which is then read whole.
type Changes struct {
	// Full is the whole state instead, when the journal cannot tell what
	// changed (it was pruned past the position asked from) or too much
	// did; the other fields are then empty.
	Full *State
	// Pos is the position to ask from next time.
	Pos int64
	// IDs are the entities written since, per kind.
	IDs ChangedIDs
	// Rows are the current rows of the entities of IDs that exist; a
	// provider's keys are opened, as Load's are.
	Rows State
}

// ChangedIDs are entity ids per kind.
type ChangedIDs struct {
	Orgs, Projects, Providers, Routes, Groups, VirtualKeys, AdminTokens []int64
}

// Len is how many ids there are.
func (c ChangedIDs) Len() int {
	return len(c.Orgs) + len(c.Projects) + len(c.Providers) + len(c.Routes) + len(c.Groups) + len(c.VirtualKeys) + len(c.AdminTokens)
}
