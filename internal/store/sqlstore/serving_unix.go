//go:build unix

package sqlstore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// flockFile takes a shared (or, with exclusive, an exclusive) flock on
// name, created 0600 if missing, without waiting: errLocked when another
// open file holds a conflicting lock.
func flockFile(name string, exclusive bool) (release func(), err error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: lock file: %w", err)
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, fmt.Errorf("store: lock %s: %w", name, err)
	}
	return func() { _ = f.Close() }, nil // closing the file releases the lock
}
