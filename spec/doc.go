// Package spec loads dagrun pipeline specs: YAML files that declare buffers,
// kernels and operations, and how to run them. Parse and Load turn a spec
// into a checked dag.Graph plus run settings and outputs; every problem is
// an *Error with the file, line and column of the YAML node it is about.
//
// # The format
//
// A spec is one YAML mapping with these sections (schema.json, beside this
// file, is the same as a JSON Schema for editors):
//
//	params:                     # optional: see Parameters
//	  T: {default: 2048, min: 16, max: 8192, multiple_of: 16}
//	run:                        # optional
//	  streams: 4                # compute streams per device and priority (1..32; default: the planner's)
//	  shared_copy_streams: false
//	  repeat: 1                 # how many times to run the graph
//	  graph: false              # capture as a CUDA graph and replay it
//	  backend: auto             # auto, cpu or cuda (gpu and nvidia mean cuda, host means cpu)
//	  world: 1                  # ranks that each run the spec (see Ranks below)
//	  collective_sms: 0         # SMs a collective holds, left free by the GEMMs beside one (see Ranks)
//	  memory:                   # optional budgets: the most the plan may need of a memory
//	    device: 40 GiB          # every device's (persistent buffers and the temporaries' arena)
//	    pinned: 8 GiB           # pinned host memory; pageable: likewise
//	buffers:                    # name: size, or name: {properties}
//	  d_x: 4 MiB                # device memory of device 0
//	  h_in:  {size: 4 MiB, placement: pinned, init: {random: 42}}
//	  ones:  {dtype: f32, count: 256, init: {value: 1.0}}
//	  d_tmp: {size: 1 MiB, temporary: true}
//	  w:     {init: {file: weights.bin}}   # the size is the file's
//	kernels:                    # kernels beyond the builtins (dag.Builtins)
//	  my_k:
//	    cuda: 'extern "C" __global__ void my_k(float* x, long long n) { ... }'
//	    params: [{name: x, type: buffer, mode: inout}, {name: n, type: i64}]
//	ops:                        # in declaration order: dependencies follow from it
//	  - copy: {from: "h_in[0:1MiB]", to: "d_x[0:1MiB]"}
//	    name: up0
//	  - launch: scale
//	    grid: 1024              # or [x, y, z]; default 1
//	    block: 256              # default 256
//	    args: {x: d_x, alpha: 2.0}
//	    priority: high          # high, normal, low or an integer; higher runs first
//	    cost: 20us              # the planner's estimate
//	    after: [up0]            # order beyond what the data implies
//	  - fill: {buffer: d_tmp, value: 0}
//	  - gemm: {a: d_x, b: w, c: d_y, m: 64, n: 256, k: 64}
//	  - all_reduce: {view: d_y, op: sum}
//	  - host: checksum
//	    reads: [h_out]
//	outputs:                    # reported after the run
//	  - h_out
//	  - {buffer: d_x, save: x.bin}
//
// Buffers: size is a byte count, optionally with a unit in any case (B,
// KiB, MiB, GiB, TiB or Ki, Mi, Gi, Ti; the decimal KB, MB, GB, TB or K,
// M, G, T: 40G is 40e9 bytes, as kubectl reads it), or dtype (u8, i32,
// i64, f32, f64, f16, bf16; default f32) and count; placement is device (default), pinned
// or pageable host memory; device is the GPU (default 0); a temporary
// buffer lives only inside the run, and its contents are undefined until
// an op writes them (device pool memory is not cleared, and an arena
// reuses the bytes of temporaries the plan has finished with). init is zeros, {value: v} (rounded to
// the dtype once, to nearest even), {random: seed}, {random: {seed: S,
// per_rank: true}} (see Ranks) or {file: path} (see Files below). Random
// contents are the same on every backend: integers in [0, 256), floats in
// [0, 1) (f16 multiples of 2^-11, bf16 multiples of 2^-8, exact in their
// dtype). Checksums and the add host step read f16 and bf16 elements as
// their values (add rounds each sum to the dtype once).
//
// Numbers are read as YAML 1.2's core schema reads them: 42, 0x1F, 0o17,
// 2.5, 1e-3, 1e20, .inf, -.inf and .nan; where an integer is expected
// (counts, seeds, grid and block) a float that is a whole number, such as
// 1e6, is as good. A UTF-8 byte-order mark at the start is ignored.
//
// Kernels: exactly one source, cuda (inline CUDA C), cuda_file, ptx or
// cubin (files), an optional entry symbol (default: the name), and params,
// each {name, type: buffer|i32|i64|f32|f64, mode: in|out|inout} (mode for
// buffers only; default inout).
//
// Ops: each has exactly one kind key and may have name, after, priority,
// cost and device.
//
//	copy:   {from: VIEW, to: VIEW}          same size, disjoint
//	fill:   {buffer: VIEW, value: NUMBER}   every element, in the buffer's dtype
//	memset2d: {buffer: VIEW, rows: N, width: N, pitch: SIZE, value: NUMBER}
//	                                        rows of width elements, pitch bytes apart, from the
//	                                        view's start (1-, 2- or 4-byte elements); its
//	                                        dependencies come from the region's bounding range
//	alloc:  NAME                            stream-ordered allocation of a temporary buffer
//	free:   NAME                            stream-ordered free of a temporary buffer
//	launch: KERNEL                          with grid, block, shared (bytes) and args; early_launch:
//	                                        true says a kernel of kernels: waits for the kernel
//	                                        before it (griddepcontrol.wait) before touching memory,
//	                                        so on sm_90 and later the planner may launch it while
//	                                        that one runs, as it does builtins (programmatic
//	                                        dependent launch; dagrun plan marks such launches early)
//	host:   checksum                        with reads: [VIEW, ...]: prints a checksum line per view
//	host:   save                            with buffer: VIEW and path: FILE: writes the bytes
//	host:   add                             with buffer: VIEW and value: NUMBER: adds it to every element
//	gemm:   {a: VIEW, b: VIEW, c: VIEW, m: M, n: N, k: K, ...}  a matrix product (below)
//	all_reduce:     {view: VIEW, op: sum}               collectives (see Ranks); op is sum
//	all_gather:     {in: VIEW, out: VIEW}               (the default), prod, min, max or avg
//	reduce_scatter: {in: VIEW, out: VIEW, op: sum}
//	broadcast:      {view: VIEW, root: RANK}
//	send:           {view: VIEW, to: RANK}
//	recv:           {view: VIEW, from: RANK}
//	while:  FLAG                            with body: [OPS] and max: N (see Loops and branches)
//	if:     FLAG                            with then: [OPS] and else: [OPS]
//
// A VIEW is "name" (the whole buffer), "name[start:end]" (a byte range;
// start or end may be left out; units allowed, as in "x[1MiB:2MiB]") or,
// for kernel arguments, {buffer, offset, size, mode}. Launch args map
// parameter names to views (buffer parameters) or numbers; they may also be
// a list in parameter order. Temporary buffers without alloc and free ops
// are allocated before their first use and freed after their last.
//
// # Builtin kernels
//
// These kernels need no declaration (dagrun kernels lists them too, and
// schema.json as builtin_kernels). Launch args name each parameter; a
// buffer's direction (in, out, inout) is how the kernel uses it, which is
// where the op's dependencies come from:
//
//	empty()
//	    does nothing: it measures launch cost
//	spin(us: f64)
//	    busy-waits for us microseconds on one block
//	iota(x: out buffer, start: f32)
//	    sets x[i] = start + i (buffers: f32, f16, bf16)
//	scale(x: inout buffer, alpha: f32)
//	    sets x[i] *= alpha (buffers: f32, f16, bf16)
//	axpy(y: inout buffer, x: in buffer, alpha: f32)
//	    sets y[i] += alpha * x[i] (buffers: f32, f16, bf16)
//	add(c: out buffer, a: in buffer, b: in buffer)
//	    sets c[i] = a[i] + b[i] (buffers: f32, f16, bf16)
//	reduce_sum(out: out buffer, in: in buffer)
//	    sets out[0] to the sum of in, accumulated in f64
//	matmul(c: out buffer, a: in buffer, b: in buffer, m: i32, n: i32, k: i32)
//	    sets c (m x n) = a (m x k) times b (k x n), row-major, accumulated in f32
//	gelu(y: out buffer, x: in buffer)
//	    sets y[i] = gelu(x[i]), tanh form (PyTorch's approximate="tanh") (buffers: f32, f16, bf16)
//	relu(y: out buffer, x: in buffer)
//	    sets y[i] = max(x[i], 0); NaN stays NaN (buffers: f32, f16, bf16)
//	bias_add(y: inout buffer, b: in buffer)
//	    adds b to every row of y: y[r, c] += b[c], a row as long as b (buffers: f32, f16, bf16)
//	softmax(y: out buffer, x: in buffer, cols: i32)
//	    sets each row of y (cols elements) to the softmax of that row of x, in f32 (buffers: f32, f16, bf16)
//	set_flag(flag: out i32 buffer, x: in buffer, threshold: f64)
//	    sets flag[0] = x[0] > threshold ? 1 : 0, compared in f64; NaN clears it (buffers: f32, f64)
//
// Kernels that take f16 or bf16 buffers compute in f32 and round each
// result once.
//
// # GEMMs
//
// A gemm op computes D = alpha op(A) op(B) + beta C over row-major
// matrices (as NumPy and PyTorch store them): op(A) is m x k, op(B) k x n,
// C and D m x n. Without d, D is C itself. The dtype is the buffers' (all
// one of f32, f64, f16, bf16; f16 and bf16 accumulate in f32), and every
// view must be device memory of the op's device. The optional keys:
//
//	d:        VIEW       the output, when it is not c: c is then only read, so
//	                     y = h W + x needs no copy (d: y, c: x, beta: 1); d is c or disjoint from it
//	trans_a:  true       op(A) = A^T: a holds a k x m matrix (trans_b: b holds n x k)
//	alpha:    1          scale factors (beta 0 by default: c is not read)
//	beta:     0
//	lda, ldb, ldc        row pitches in elements (default: the stored rows' length);
//	                     d shares c's layout
//	batch:    1          that many products, the matrices of each operand
//	stride_a, stride_b,  stride_X elements apart (default: packed, one after another;
//	stride_c             the output's matrices must not overlap)
//	tf32:     false      let an f32 GEMM round its inputs to TF32 on tensor cores
//	epilogue: none       what is done to each element of the result before it is
//	                     stored, in f32 (f32, f16 and bf16 GEMMs): bias, gelu,
//	                     relu, bias_gelu or bias_relu (the bias first)
//	bias:     VIEW       the vector the bias epilogues add: n elements of the
//	                     gemm's dtype, element j added to column j of every row
//	                     (as bias_add adds b to rows as long as b)
//
// A gemm with an epilogue rounds its result once, after the epilogue, as
// cuBLASLt does; a gemm followed by bias_add and gelu or relu launches
// rounds after each. The planner fuses such launches into the gemm before
// it where that computes the same (dagrun run --fuse none keeps them).
//
// The views must hold every element the shapes, pitches and strides
// reach; problems (a view too small, a pitch below the row length, mixed
// dtypes, an output overlapping an input) are reported at the key they are
// about.
//
// # Loops and branches
//
// A while op runs its body, a list of ops, while its flag (a VIEW of one
// i32 element in device memory) is non-zero, reading it before every
// iteration; an if op runs then when the flag is non-zero and else (which
// may be left out) when it is zero. The decision is made on the device,
// without the host: on the cuda backend the bodies are conditional nodes
// of the captured CUDA graph. The set_flag builtin sets a flag from data:
//
//	buffers:
//	  x:    {dtype: f32, count: 1024, init: {value: 1}}
//	  err:  {dtype: f32, count: 1}
//	  flag: {dtype: i32, count: 1, init: {value: 1}}
//	ops:
//	  - while: flag
//	    max: 1000               # optional, 1 to 2^40: reaching it with the flag set fails the run, naming the loop
//	    name: refine
//	    body:
//	      - {launch: scale, args: {x: x, alpha: 0.5}}
//	      - {launch: reduce_sum, args: {out: err, in: x}}
//	      - {launch: set_flag, args: {flag: flag, x: err, threshold: 0.001}, block: 1}
//	  - if: flag
//	    then: [{fill: {buffer: x, value: 0}}]
//	    else: [{launch: scale, args: {x: x, alpha: 2}}]
//
// A while whose body ends in a set_flag of its own flag (no op of the body
// follows it) runs cheaper on cuda: that kernel sets the node's condition,
// with no kernel of dagrun's own per iteration (dagrun plan names it).
//
// To the ops around it a while or if is one op that reads its flag and
// accesses whatever its bodies access: ops after it depend on what the
// bodies write, and the bodies follow what came before. Within a body,
// dependencies come from the data as everywhere, and after may name only
// ops of the same body (the loop itself is what outside ops name). A body
// runs on the flag's device; collectives and ops of another device are
// errors at the op, saying why. The cuda backend's bodies hold what a
// conditional node can: kernels, fills, 2-D memsets, copies within device
// memory, gemms and further loops and branches; it refuses host steps,
// tasks and copies to or from host memory in a body when the run starts,
// naming the op (the cpu backend runs them). Bodies are not empty, nest
// at most 16 deep (MaxNesting), and their ops count towards the spec's 4194304 (MaxOps). Ops of a body that the spec does not name are
// named after their loop or branch (refine/scale2) and placed in messages
// by their place in it (ops[0].body[1]).
//
// # Parameters
//
// A spec may declare integer parameters, each with a default and a range
// of values, and use them in integer expressions (+ - * / %, parentheses;
// numbers may carry size units where a size is read) wherever a size, a
// count, a view's bounds, a grid or a gemm dimension is written:
//
//	params:
//	  T: {default: 2048, min: 16, max: 8192, multiple_of: 16}
//	buffers:
//	  h_x: {size: "T * 8 KiB", placement: pinned}
//	  d_x: {dtype: bf16, count: T * 4096}
//	ops:
//	  - copy: {from: "h_x[0:T*8KiB]", to: d_x}
//
// WithParam (the CLI's --set T=512) picks a value in the range; every step
// of an expression is checked for overflow at that value. CheckParamRange
// (the CLI's validate) checks each expression at every value of the range
// (past 4096 combinations, over exact bounds of the range) and the whole
// spec at the least and the greatest values.
//
// # Ranks
//
// A spec is one rank's program. run.world: N (or WithRank's world, the
// CLI's --world) runs N ranks of it, each its own copy of every buffer on
// its own device (rank r on device r in one process), and the collectives
// combine the ranks' views, as NCCL's do: all_reduce reduces a view across
// the ranks in place; all_gather's out is world times its in (rank r's in
// lands at block r of out); reduce_scatter's in is world times its out
// (rank r keeps block r of the reduction); broadcast copies rank root's
// view to every rank; send and recv pair up in the order they appear per
// peer, with views of one size. The in and out views are disjoint. With a
// world of 1 every collective is allowed and is a no-op or a copy, as in
// NCCL; roots, peers and the size ratios are checked against the world at
// their positions (dag.Graph.CheckWorld), and every rank issues the
// collectives in spec order.
//
// A root or peer may be an expression of rank, world and the parameters:
// send: {view: x, to: "(rank + 1) % world"} and recv: {view: y, from:
// "(rank + world - 1) % world"} make a ring of any world.
//
// all_reduce: {view: y, op: sum, split: 4} asks the planner to cut the
// reduction, with the GEMMs that compute y's rows and the elementwise
// launches around it, into 4 blocks of rows, so that the reduction of one
// block runs beside the GEMMs of the next (the plan lists the pieces, or
// says why it could not cut them). split: 1 keeps it whole; left out, the
// planner's cost model decides, given run.collective_sms: the SMs a
// collective holds (NCCL's CTAs are bounded to as many), which the GEMMs
// the planner runs beside a collective leave free. Without it a split
// GEMM keeps every SM, and the cost model cuts nothing by itself.
//
// Data differs by rank through {rank} in init file paths ("shard{rank}.bin")
// and through random inits with per_rank: true, whose seed for rank r is
// the seed mixed with a hash of r (rank 0 gets the seed itself). Every path
// a rank writes (save host steps, outputs' save) has {rank} in it when the
// world is above 1: two ranks writing one file is an error before anything
// runs. ExpandRank writes a rank into a path by the same rule.
//
// A spec that places buffers or ops on devices with an explicit device: is
// a program for several devices of one process (with device-to-device
// copies between them) and cannot also set a world above 1.
//
// To run a world, parse the spec once per rank: Load or Parse with
// WithRank(r, world) (world 0 keeps run.world), or Spec.ForRank(r) on a
// spec already parsed. Each result is rank r's program (Spec.Rank is r):
// its own graph, its own initial contents and its own paths; the graphs'
// CollectiveSequence agree.
//
// # Errors and warnings
//
// Parse reports every problem it can find in one round, each once, as an
// ErrorList ordered by position:
// unknown fields (with the closest known one), wrong types, bad sizes and
// units, unknown buffers, kernels and ops, malformed views, duplicate
// names, and every error of dag.Builder.Build, placed at the op, buffer or
// kernel (or its field) it names. Copies between pageable host memory and a
// device are warnings (they are synchronous in CUDA and cannot be captured),
// and errors when run.graph is true. The graph is built from every op that
// could be read, so that its problems (a dependency cycle above all) come
// in the same round as the others; problems of temporary buffers' lifetimes
// are left for the next round when ops that use them could not be read.
// Also refused, so that validating a spec means running it will not refuse
// it: a cost beyond 24h, a CUDA C, PTX or cubin kernel launched when
// run.backend is cpu, and a temporary buffer that an alloc op allocates and
// nothing frees while the graph runs more than once (run.repeat above 1, or
// run.graph).
//
// Messages name an op the spec names as op "name", and one it does not by
// its place in the list, ops[i] (Spec.OpLabel gives that form for an op of
// the graph, whose made-up name is its kernel or kind and index).
//
// # Files
//
// One rule for every path a spec names: a path it reads (init files,
// kernel files) is taken relative to the spec's directory (for a spec read
// from stdin, the directory WithBaseDir gives, the working directory), and
// a path it writes (save host steps, outputs' save) relative to the save
// directory (WithSaveDir, the CLI's --save-dir; by default the spec's
// directory too). Absolute paths, paths that leave that tree and symbolic
// links out of it are refused, at the position of the path, unless they
// lie in a tree that AllowPath (the CLI's --allow-path) allows. The reads
// and writes go through an os.Root, so the confinement holds against
// links changed while the spec runs. Writing one file twice, writing the
// spec itself or a file the spec reads are errors too. Spec.WriteFile
// writes a temporary file beside the target and renames it over the
// target once complete, so a failed or interrupted run leaves the old
// file or none, never a torn one.
//
// # Limits
//
// So that no input makes loading take more than time and memory linear in
// its size, a spec holds at most 128 MiB (MaxSpecBytes), 1048576 buffers
// (MaxBuffers), 65536 kernels (MaxKernels), 4194304 ops (MaxOps; those of
// bodies too) and 1024 parameters per kernel (MaxArgs), is nested at most
// 64 levels (MaxDepth; loops and branches at most 16, MaxNesting), and
// names things with at most 256 characters (MaxNameLen); each is an error
// at the position that crosses it. Aliases may bring at most about a million nodes into the reading
// (nested aliases, "billion laughs", are refused, not expanded), the
// did-you-mean suggestions compare only names of similar length up to 64
// bytes within a fixed budget of work, and at most 1000 problems are listed
// (MaxErrors).
package spec
