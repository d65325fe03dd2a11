// Package dagtest makes dag graphs for tests and benchmarks: seeded random
// graphs that are valid and executable (Random), random graphs with loops
// and branches and their results worked out in Go (RandomControl), large
// cheap graphs of a given shape (Shape), and small named fixtures
// (Fixtures).
//
// Every graph it returns passes dag.Build; a graph that did not would be a
// bug in this package, so the generators panic instead of returning errors.
package dagtest
