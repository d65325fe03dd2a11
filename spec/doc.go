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
//	run:                        # optional
//	  streams: 4                # compute streams per device and priority (1..32; default: the planner's)
//	  shared_copy_streams: false
//	  repeat: 1                 # how many times to run the graph
//	  graph: false              # capture as a CUDA graph and replay it
//	  backend: auto             # auto, cpu or cuda (gpu and nvidia mean cuda, host means cpu)
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
//	  - host: checksum
//	    reads: [h_out]
//	outputs:                    # reported after the run
//	  - h_out
//	  - {buffer: d_x, save: x.bin}
//
// Buffers: size is a byte count, optionally with a unit (B, KiB, MiB, GiB,
// TiB, or the decimal KB, MB, GB, TB), or dtype (u8, i32, i64, f32, f64;
// default f32) and count; placement is device (default), pinned or pageable
// host memory; device is the GPU (default 0); a temporary buffer lives only
// inside the run. init is zeros, {value: v}, {random: seed} or {file: path}
// (see Files below).
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
//	alloc:  NAME                            stream-ordered allocation of a temporary buffer
//	free:   NAME                            stream-ordered free of a temporary buffer
//	launch: KERNEL                          with grid, block, shared (bytes) and args
//	host:   checksum                        with reads: [VIEW, ...]: prints a checksum line per view
//	host:   save                            with buffer: VIEW and path: FILE: writes the bytes
//	host:   add                             with buffer: VIEW and value: NUMBER: adds it to every element
//
// A VIEW is "name" (the whole buffer), "name[start:end]" (a byte range;
// start or end may be left out; units allowed, as in "x[1MiB:2MiB]") or,
// for kernel arguments, {buffer, offset, size, mode}. Launch args map
// parameter names to views (buffer parameters) or numbers; they may also be
// a list in parameter order. Temporary buffers without alloc and free ops
// are allocated before their first use and freed after their last.
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
// its size, a spec holds at most MaxSpecBytes bytes, MaxBuffers buffers,
// MaxKernels kernels, MaxOps ops and MaxArgs parameters per kernel, is
// nested at most MaxDepth levels, and names things with at most
// MaxNameLen characters; each is an error at the position that crosses
// it. Aliases may bring at most about a million nodes into the reading
// (nested aliases, "billion laughs", are refused, not expanded), the
// did-you-mean suggestions compare only names of similar length up to 64
// bytes within a fixed budget of work, and at most MaxErrors problems are
// listed.
package spec
