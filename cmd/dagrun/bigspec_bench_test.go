package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/dagrun/dagrun/internal/spectest"
)

// cpuTime is the CPU time this process has used, all threads (the garbage
// collector's included): on a shared machine a steadier measure than the
// wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkBigSpec measures dagrun validate and dagrun plan of a generated
// 100,000-op spec against the floor, the bare YAML parse of the same file
// (read and parsed into go.yaml.in/yaml/v3's positioned nodes), in the same
// run: validate and plan report their CPU time (x-parse) and wall time
// (x-parse-wall) as multiples of the parse's. Run the parse with them
// (-bench BigSpec), as the ratios need it.
func BenchmarkBigSpec(b *testing.B) {
	const n = 100_000
	path := filepath.Join(b.TempDir(), "big.yaml")
	if err := os.WriteFile(path, spectest.Gen(n), 0o644); err != nil {
		b.Fatal(err)
	}
	var floorCPU, floorWall float64
	measure := func(b *testing.B, f func()) (cpu, wall float64) {
		b.ReportAllocs()
		start, wstart := cpuTime(), time.Now()
		k := 0
		for b.Loop() {
			f()
			k++
		}
		cpu = float64(cpuTime()-start) / float64(k)
		wall = float64(time.Since(wstart)) / float64(k)
		b.ReportMetric(cpu, "cpu-ns/op")
		return cpu, wall
	}
	b.Run("parse", func(b *testing.B) {
		floorCPU, floorWall = measure(b, func() {
			src, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			var doc yaml.Node
			if err := yaml.Unmarshal(src, &doc); err != nil {
				b.Fatal(err)
			}
		})
	})
	for _, cmd := range []string{"validate", "plan"} {
		b.Run(cmd, func(b *testing.B) {
			cpu, wall := measure(b, func() {
				var stderr strings.Builder
				if code := run([]string{cmd, path}, strings.NewReader(""), io.Discard, &stderr); code != 0 {
					b.Fatalf("dagrun %s: exit %d: %s", cmd, code, stderr.String())
				}
			})
			if floorCPU > 0 {
				b.ReportMetric(cpu/floorCPU, "x-parse")
				b.ReportMetric(wall/floorWall, "x-parse-wall")
			}
		})
	}
}
