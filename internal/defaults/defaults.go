// Package defaults fills unset numeric settings of config structs, where
// zero or a negative value means "use the default".
package defaults

// Set gives *p the default v unless *p is already positive.
func Set[T ~int | ~int64 | ~float64](p *T, v T) {
	if *p <= 0 {
		*p = v
	}
}
