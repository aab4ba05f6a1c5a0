package fleet

import (
	"errors"
	"fmt"

	"github.com/rolter/rolter/internal/store"
)

// ErrWouldDrainPool refuses a drain that would leave a pool of several
// hosts with none serving.
var ErrWouldDrainPool = errors.New("fleet: the drain would leave the pool with no serving host")

// DrainCheck is the pool check of h's drain: it refuses (wrapping
// ErrWouldDrainPool) when h shares its pool with other hosts and none of
// them is serving and not draining itself, so applying to every host of a
// pool at once takes the operator's force. A host alone in its pool
// drains: its callers get 503 pool_draining until it serves again.
func DrainCheck(h *store.Host) store.PoolCheck {
	return func(pool []store.Host) error {
		if len(pool) == 0 {
			return nil
		}
		for _, o := range pool {
			if o.State == store.HostServing && o.Drain == nil {
				return nil
			}
		}
		return fmt.Errorf("%w: host %d would be the last of the %d hosts serving %q to leave routing", ErrWouldDrainPool, h.ID, len(pool)+1, h.ModelName)
	}
}
