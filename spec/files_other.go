//go:build !unix

package spec

// openNonblock: only Unix has FIFOs that block an open.
const openNonblock = 0
