package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rolter/rolter/internal/fleetapi"
)

// stateFile is the name of the agent's state in its state directory.
const stateFile = "state.json"

// state is what the agent keeps on disk so that a restart during a gateway
// outage serves what was served before. It holds vLLM API keys: the file
// is 0600.
type state struct {
	// Config is the last configuration fetched from the gateway.
	Config *fleetapi.Config `json:"config,omitempty"`
	// Applied is, per host id, the assignment the running vLLM was started
	// from (its Revision is the applied revision). It can lag Config when a
	// new revision waits for apply.
	Applied map[int64]fleetapi.Assignment `json:"applied,omitempty"`
	// KVCache is, per host id, the kv-cache calibration of its kv_cache:
	// auto recipe, for the revision and GPUs it was made on.
	KVCache map[int64]kvRecord `json:"kv_cache,omitempty"`
}

func loadState(dir string) (state, error) {
	var st state
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return state{}, fmt.Errorf("%s: %w", stateFile, err)
	}
	return st, nil
}

// encode is the file's content; equal states encode equally (map keys are
// sorted), so an unchanged state is not rewritten.
func (st state) encode() ([]byte, error) {
	return json.MarshalIndent(st, "", "  ")
}

// writeFileAtomic replaces path with data (mode 0600): a temporary file in
// the same directory, synced, then renamed over it, so a crash leaves the
// old file or the new one, never a torn one.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close() // the write error is the one to report
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// stateWriter writes the state file when its content changes.
type stateWriter struct {
	path string
	last []byte
}

func (w *stateWriter) write(st state) error {
	b, err := st.encode()
	if err != nil {
		return err
	}
	if bytes.Equal(b, w.last) {
		return nil
	}
	if err := writeFileAtomic(w.path, b); err != nil {
		return err
	}
	w.last = b
	return nil
}
