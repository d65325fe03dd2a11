//go:build race

package cpu_test

// raceEnabled: the race detector slows the Go kernels some twentyfold.
const raceEnabled = true
