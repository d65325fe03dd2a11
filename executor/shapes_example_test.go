package executor_test

import (
	"context"
	"fmt"
	"log"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/spec"
)

// One program at three shapes from one Shapes: each shape is planned,
// opened and captured at its first run and replayed after; a value between
// the buckets runs on the next larger one, its parameter being paddable;
// the shapes share one copy of the memory, as large as the largest's.
func ExampleOpenShapes() {
	s, err := spec.Parse("scale.yaml", []byte(`params:
  T: {default: 1024, min: 16, max: 4096, multiple_of: 16, paddable: true}
buffers:
  x: {dtype: f32, count: T, init: {value: 1}}
  t: {dtype: f32, count: T, temporary: true}
ops:
  - copy: {from: x, to: t}
  - launch: scale
    args: {x: t, alpha: 2}
  - copy: {from: t, to: x}
`))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	b := cpu.New()
	defer b.Close()
	shapes, err := executor.OpenShapes(ctx, b, s.Shape, executor.WithPaddable(s.Paddable()...),
		executor.WithBuckets(map[string]int64{"T": 512}, map[string]int64{"T": 1024}, map[string]int64{"T": 2048}))
	if err != nil {
		log.Fatal(err)
	}
	defer shapes.Close()
	for _, T := range []int64{512, 2048, 700, 2048} {
		run, err := shapes.Run(ctx, map[string]int64{"T": T})
		if err != nil {
			log.Fatal(err)
		}
		x, err := shapes.Read("x")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("T=%d ran as %s (replayed %v), x holds %d bytes\n", T, spec.FormatValues(run.Shape), run.Replayed, len(x))
	}
	held, shared, _ := shapes.Memory()
	fmt.Printf("shared %v: persistent %d bytes, arena %d bytes\n", shared, held[0].Persistent, held[0].Arena)
	// Output:
	// T=512 ran as T=512 (replayed true), x holds 2048 bytes
	// T=2048 ran as T=2048 (replayed true), x holds 8192 bytes
	// T=700 ran as T=1024 (replayed true), x holds 4096 bytes
	// T=2048 ran as T=2048 (replayed true), x holds 8192 bytes
	// shared true: persistent 8192 bytes, arena 8192 bytes
}
