package litellm

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"

	"github.com/rolter/rolter/internal/store"
)

// The import identity.
//
// A provider the import creates records the identities of the entries it
// serves (store.ProviderImport). A re-run finds it again by them, however
// its base_url or key pool were edited since, so that an edit or a key
// rotation updates the provider instead of creating a "-2" beside it.
//
// An entry's identity is a digest of the project it is imported into and
//
//   - LiteLLM's own deployment id, model_info.id, when the entry has one:
//     it survives any edit of the entry, so it is the one to set;
//   - otherwise its model_name, its litellm_params.model and its
//     occurrence among the entries with the same two (1 for the first):
//     editing api_base, api_key or any other setting keeps it, and so does
//     adding, removing or reordering other entries. Reordering two entries
//     with the same model_name and model swaps their identities.
//
// The project is part of it because routes go to a project while
// providers belong to the org: the same file imported into two projects
// must not have one import rewrite the providers of the other. (The second
// import still reuses a provider with the same kind, base_url and key, as
// any import does.) api_base and api_key are not part of it, and no secret
// is: the digest is stored in clear in the provider's settings.

// EntryID is the import identity of entry e imported into project.
func EntryID(project string, e Entry) string {
	h := sha256.New()
	if e.InfoID != "" {
		writeFields(h, "litellm model_info.id", project, e.InfoID)
	} else {
		writeFields(h, "litellm entry", project, e.ModelName, e.Model, strconv.Itoa(e.Occurrence))
	}
	return "litellm:" + hex.EncodeToString(h.Sum(nil)[:16])
}

// writeFields writes each field with its length first, so that no two
// lists of fields write the same bytes.
func writeFields(h interface{ Write([]byte) (int, error) }, fields ...string) {
	for _, f := range fields {
		_, _ = h.Write([]byte(strconv.Itoa(len(f)) + ":" + f))
	}
}

// claim finds the live provider an earlier import created for any of ids,
// among those not claimed yet; the lowest id wins.
func claim(existing []store.Provider, ids []string, claimed map[int64]bool) *store.Provider {
	for i := range existing {
		p := &existing[i]
		if p.DeletedAt != nil || claimed[p.ID] || p.Settings.Import == nil {
			continue
		}
		for _, id := range p.Settings.Import.IDs {
			if slices.Contains(ids, id) {
				return p
			}
		}
	}
	return nil
}
