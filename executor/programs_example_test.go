package executor_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/dagrun/dagrun/cpu"
	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor"
	"github.com/dagrun/dagrun/planner"
)

// A chunked pipeline: each chunk's upload, kernel and download are ops of
// their own, so on a GPU chunk 1's upload runs beside chunk 0's kernel.
// The dependencies come from the chunks' element ranges alone.
func Example_chunkedPipeline() {
	const n, chunks = 1024, 4
	const per = n / chunks
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i)
	}
	b := dag.New()
	host := b.Array("in", dag.F32, n, dag.PinnedHost(), dag.Data(in))
	x := b.Array("x", dag.F32, n)
	out := b.Array("out", dag.F32, n, dag.PinnedHost())
	for c := range int64(chunks) {
		b.Copy(x.Elements(c*per, per), host.Elements(c*per, per), dag.Name(fmt.Sprint("upload", c)))
		b.Launch(dag.Scale, dag.Grid1(1), dag.Threads(per), x.Elements(c*per, per), 2.0, dag.Name(fmt.Sprint("double", c)))
		b.Copy(out.Elements(c*per, per), x.Elements(c*per, per), dag.Name(fmt.Sprint("download", c)))
	}
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	res, err := executor.Run(context.Background(), g, executor.WithBackend("cpu"), executor.WithPlan(planner.Streams(2)))
	if err != nil {
		log.Fatal(err)
	}
	v := res.Float32s(out)
	fmt.Println(v[1], v[per], v[n-1])
	// Output: 2 512 2046
}

// Capture once, then replay 100 times, changing a kernel's scalar between
// replays in place: no planning and no capture again.
func Example_replays() {
	b := dag.New()
	x := b.Array("x", dag.F32, 4, dag.Data([]float32{1, 2, 3, 4}))
	sum := b.Array("sum", dag.F32, 4, dag.Zeros())
	b.Call(dag.Axpy, dag.Grid1(1), dag.Threads(4), dag.Args{"y": sum, "x": x, "alpha": 0}, dag.Name("accumulate"))
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	p, err := planner.New(g)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	s, err := executor.Open(ctx, cpu.New(), p)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	graph, err := s.Capture(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for i := range 100 {
		// sum += i * x, for i = 0..99: sum = 4950 x.
		if err := graph.Update(ctx, executor.SetArg("accumulate", "alpha", i)); err != nil {
			log.Fatal(err)
		}
		if err := graph.Run(ctx); err != nil {
			log.Fatal(err)
		}
	}
	v, err := executor.ReadValues[float32](s, sum)
	if err != nil {
		log.Fatal(err)
	}
	st := graph.Stats()
	fmt.Println(v, st.Launches, "replays,", st.UpdatesInPlace, "updates in place")
	// Output: [4950 9900 14850 19800] 100 replays, 99 updates in place
}

// GEMMs in f32 and in bf16 (f32 accumulation): c = a w / 3, where the
// thirds show each type's rounding. Data and Float32s convert the values;
// bf16 travels as float32.
func Example_gemm() {
	a := []float32{1, 2, 3, 4, 5, 6} // 2 x 3
	w := []float32{1, 0, 0, 1, 1, 1} // 3 x 2
	b := dag.New()
	var cs []*dag.Buffer
	for _, dt := range []dag.DType{dag.F32, dag.BF16} {
		ab := b.Array("a_"+dt.String(), dt, 6, dag.Data(a))
		wb := b.Array("w_"+dt.String(), dt, 6, dag.Data(w))
		c := b.Array("c_"+dt.String(), dt, 4)
		b.Gemm(c.All(), ab.All(), wb.All(), dag.GemmShape{M: 2, N: 2, K: 3}, dag.Alpha(1.0/3))
		cs = append(cs, c)
	}
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	res, err := executor.Run(context.Background(), g, executor.WithBackend("cpu"))
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range cs {
		fmt.Println(c.DType, res.Float32s(c))
	}
	// Output:
	// f32 [1.3333334 1.6666667 3.3333335 3.6666667]
	// bf16 [1.3359375 1.6640625 3.328125 3.671875]
}

// A loop on the device: halve x while it is above 1. The set_flag builtin
// sets the loop's flag from x; AtMost bounds the loop, so that a flag
// that never clears fails the run instead of hanging it.
func Example_deviceLoop() {
	b := dag.New()
	x := b.Array("x", dag.F32, 1, dag.Value(1000))
	flag := b.Array("flag", dag.I32, 1, dag.Value(1))
	one := dag.Grid1(1)
	b.While(flag.All(), func(body *dag.Builder) {
		body.Call(dag.Scale, one, one, dag.Args{"x": x, "alpha": 0.5})
		body.Call(dag.SetFlag, one, one, dag.Args{"flag": flag, "x": x, "threshold": 1})
	}, dag.AtMost(100), dag.Name("halve"))
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	res, err := executor.Run(context.Background(), g, executor.WithBackend("cpu"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Float32s(x))
	// Output: [0.9765625]
}

// A stream task: a function of the program's own that dagrun orders with
// the rest of the graph by the views it declares. On a GPU it would
// enqueue its work (a library call, say) on on.Handle with the views'
// addresses on.Addrs; on the cpu backend, which RunsOnCPU allows, it gets
// the host's stream and does the work itself on the views' bytes.
func Example_streamTask() {
	square := func(ctx context.Context, on dag.TaskStream) error {
		if !on.Host {
			return errors.New("this example has no GPU code")
		}
		in, err := dag.DecodeValues[float32](dag.F32, on.Mem[0])
		if err != nil {
			return err
		}
		for i, v := range in {
			in[i] = v * v
		}
		out, err := dag.EncodeValues(dag.F32, in)
		copy(on.Mem[1], out)
		return err
	}
	b := dag.New()
	x := b.Array("x", dag.F32, 4, dag.Data([]float32{1, 2, 3, 4}))
	y := b.Array("y", dag.F32, 4)
	b.Task(square, dag.In(x.All()), dag.Out(y.All()), dag.Name("square"), dag.RunsOnCPU())
	b.Call(dag.Scale, dag.Grid1(1), dag.Threads(4), dag.Args{"x": y, "alpha": 10})
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	res, err := executor.Run(context.Background(), g, executor.WithBackend("cpu"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Float32s(y))
	// Output: [10 40 90 160]
}

// Misuses are errors that say what is wrong and what to do, and that
// errors.Is and errors.As tell apart. Build's name the op and the field
// at fault; their Hint (left out here) says how to fix it.
func Example_misuses() {
	build := func(declare func(b *dag.Builder, x *dag.Buffer)) {
		b := dag.New()
		declare(b, b.Array("x", dag.F32, 4))
		_, err := b.Build()
		for _, e := range dag.Errors(err) {
			fmt.Printf("op %s, %s: %s\n", e.Op, e.Field, e.Msg)
		}
	}
	build(func(b *dag.Builder, x *dag.Buffer) {
		in := b.Array("in", dag.F32, 4, dag.PinnedHost(), dag.Value(1))
		b.Copy(in.All(), x.All(), dag.Name("upload")) // meant x <- in: the destination comes first
	})
	build(func(b *dag.Builder, x *dag.Buffer) {
		b.Fill(x.All(), 0, dag.Name("clear"), dag.Priority(42), dag.Alpha(2))
	})

	b := dag.New()
	x := b.Array("x", dag.F32, 4, dag.Zeros())
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	p, err := planner.New(g)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	s, err := executor.Open(ctx, cpu.New(), p)
	if err != nil {
		log.Fatal(err)
	}
	err = executor.WriteValues(s, x, []int32{1, 2, 3, 4})
	_, wrongType := errors.AsType[*dag.DTypeError](err)
	fmt.Println("int32s into f32:", wrongType)
	s.Close()
	fmt.Println("run after Close:", errors.Is(s.Run(ctx), executor.ErrClosed))
	// Output:
	// op upload, from: reads all of x, which nothing wrote before it and x has no init
	// op clear, priority: priority 42 is out of range
	// op clear, options: option Alpha does not apply to fill ops
	// int32s into f32: true
	// run after Close: true
}
