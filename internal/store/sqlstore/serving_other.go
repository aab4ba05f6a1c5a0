//go:build !unix

package sqlstore

// flockFile does nothing where there is no flock: a running gateway on a
// SQLite store is not detected there (docs/backup.md).
func flockFile(string, bool) (func(), error) { return func() {}, nil }
