package spec

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/dagrun/dagrun/internal/spectest"
)

// genSpec is the generated spec of about n ops the benchmarks load.
var genSpec = spectest.Gen

var benchSizes = []int{10_000, 100_000}

// cpuTime is the CPU time this process has used, all threads (the garbage
// collector's included): on a shared machine a steadier measure of work
// than the wall clock, reported beside it as cpu-ns/op.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loop runs f b.N times and reports its CPU time per op.
func loop(b *testing.B, f func()) {
	b.ReportAllocs()
	start := cpuTime()
	n := 0
	for b.Loop() {
		f()
		n++
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(n), "cpu-ns/op")
}

// liveBytes is the heap that keep holds after a collection.
func liveBytes(make func() any) float64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	keep := make()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	return float64(after.HeapAlloc) - float64(before.HeapAlloc)
}

// BenchmarkParseYAML is the floor: the bare parse of a generated spec into
// go.yaml.in/yaml/v3's positioned nodes, which the loader builds on.
func BenchmarkParseYAML(b *testing.B) {
	for _, n := range benchSizes {
		src := genSpec(n)
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			parse := func() any {
				var doc yaml.Node
				if err := yaml.Unmarshal(src, &doc); err != nil {
					b.Fatal(err)
				}
				return &doc
			}
			loop(b, func() { parse() })
			b.ReportMetric(liveBytes(parse)/float64(n), "live-B/op")
		})
	}
}

// BenchmarkLoad is Parse of the same generated specs: YAML, checks, the
// dag and its dependencies.
func BenchmarkLoad(b *testing.B) {
	for _, n := range benchSizes {
		src := genSpec(n)
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			load := func() any {
				s, err := Parse("gen.yaml", src)
				if err != nil {
					b.Fatal(err)
				}
				return s
			}
			loop(b, func() { load() })
			// What the loaded spec holds; at its peak, loading holds this
			// and the YAML tree (ParseYAML's live-B/op) at once.
			b.ReportMetric(liveBytes(load)/float64(n), "live-B/op")
		})
	}
}

// misspelt is a spec that names an unknown buffer with a name n bytes
// long, beside many declared buffers of about that length.
func misspelt(n int) []byte {
	var b strings.Builder
	b.WriteString("buffers:\n")
	for i := range 100 {
		fmt.Fprintf(&b, "  b%d: 16\n", i)
	}
	b.WriteString("ops: [{fill: {buffer: " + strings.Repeat("b", n) + ", value: 1}}]\n")
	return []byte(b.String())
}

// BenchmarkHostile measures the inputs that once took quadratic or worse
// time and memory, at growing sizes: each should grow linearly (or stay
// flat where a limit cuts the work short).
func BenchmarkHostile(b *testing.B) {
	families := []struct {
		name  string
		sizes []int
		gen   func(int) []byte
	}{
		{"nesting", []int{1000, 9000}, deepFlow},                        // within the parser's limit of 10000
		{"nesting-beyond", []int{10_000, 100_000, 1_000_000}, deepFlow}, // refused by the parser
		{"long-name", []int{10_000, 100_000, 1_000_000}, longName},
		{"misspelt-name", []int{10_000, 100_000, 1_000_000}, misspelt},
		{"alias-fan-out", []int{1000, 10_000, 100_000}, aliasFanOut},
	}
	for _, f := range families {
		for _, n := range f.sizes {
			src := f.gen(n)
			b.Run(fmt.Sprintf("%s/n=%d", f.name, n), func(b *testing.B) {
				b.SetBytes(int64(len(src)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Parse("h.yaml", src); err == nil {
						b.Fatal("no error")
					}
				}
			})
		}
	}
}

// BenchmarkAt is Spec.At, a new value of T every time: of
// examples/mlp_stream.yaml (copies, GEMMs and launches), of
// examples/ranks/tp_mlp.yaml (an all-reduce among GEMMs and launches,
// collective_sms a parameter) and of controlSpec (loops and branches,
// nested). Each is made of recipes where they know its kinds, and read
// from the document again where not.
func BenchmarkAt(b *testing.B) {
	for _, tc := range []struct {
		name, file, src string
		first           int64
	}{
		{"mlp_stream", "../examples/mlp_stream.yaml", "", 512},
		{"tp_mlp", "../examples/ranks/tp_mlp.yaml", "", 512},
		{"loops", "", controlSpec, 64},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var s *Spec
			var err error
			if tc.file != "" {
				s, err = Load(tc.file)
			} else {
				s, err = Parse("loops.yaml", []byte(tc.src))
			}
			if err != nil {
				b.Fatal(err)
			}
			i := 0
			loop(b, func() {
				if _, err := s.At(map[string]int64{"T": tc.first + 16*int64(i%64)}); err != nil {
					b.Fatal(err)
				}
				i++
			})
		})
	}
}
