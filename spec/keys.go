package spec

import (
	"slices"
	"strings"

	"github.com/dagrun/dagrun/dag"
)

// The keys and values the format accepts. The loader checks specs against
// these tables and a test checks schema.json against them, so the two
// cannot drift apart.
var (
	topKeys      = []string{"params", "run", "buffers", "kernels", "ops", "outputs"}
	runKeys      = []string{"streams", "shared_copy_streams", "repeat", "graph", "backend", "world", "memory", "collective_sms"}
	memoryKeys   = []string{"device", "pinned", "pageable"}
	bufferKeys   = []string{"size", "dtype", "count", "placement", "device", "temporary", "init"}
	initKeys     = []string{"zeros", "value", "random", "file"}
	randomKeys   = []string{"seed", "per_rank"}
	kernelKeys   = []string{"cuda", "cuda_file", "ptx", "cubin", "entry", "params"}
	sourceKeys   = []string{"cuda", "cuda_file", "ptx", "cubin"}
	paramKeys    = []string{"name", "type", "mode"}
	viewKeys     = []string{"buffer", "offset", "size", "mode"}
	outputKeys   = []string{"buffer", "save"}
	copyKeys     = []string{"from", "to"}
	fillKeys     = []string{"buffer", "value"}
	memset2DKeys = []string{"buffer", "rows", "width", "pitch", "value"}
	gemmKeys     = []string{"a", "b", "c", "d", "m", "n", "k", "trans_a", "trans_b", "alpha", "beta",
		"lda", "ldb", "ldc", "batch", "stride_a", "stride_b", "stride_c", "tf32", "epilogue", "bias"}
	// collectiveKeys are the keys of each collective's mapping.
	collectiveKeys = map[string][]string{
		"all_reduce":     {"view", "op", "split"},
		"all_gather":     {"in", "out"},
		"reduce_scatter": {"in", "out", "op"},
		"broadcast":      {"view", "root"},
		"send":           {"view", "to"},
		"recv":           {"view", "from"},
	}
	opKindKeys = []string{"copy", "fill", "memset2d", "launch", "alloc", "free", "host", "gemm",
		"all_reduce", "all_gather", "reduce_scatter", "broadcast", "send", "recv", "while", "if"}
	opCommon   = []string{"name", "after", "priority", "cost", "device"}
	launchKeys = []string{"grid", "block", "shared", "early_launch", "args"}
	hostKeys   = map[string][]string{"checksum": {"reads"}, "save": {"buffer", "path"}, "add": {"buffer", "value"}}
	hostSteps  = []string{"checksum", "save", "add"}
	backends   = []string{"auto", "cpu", "cuda"}
	// backendAliases are the names users try for a backend.
	backendAliases = map[string]string{"gpu": "cuda", "nvidia": "cuda", "device": "cuda", "host": "cpu"}
	placements     = []string{"device", "pinned", "pageable"}
	dtypes         = dtypeNames()
	modes          = []string{"in", "out", "inout"}
	paramTypes     = []string{"buffer", "i32", "i64", "f32", "f64"}
	priorities     = []string{"high", "normal", "low"}
	initStrings    = []string{"zeros", "none"}
	reductions     = reductionNames()
	epilogues      = dag.EpilogueNames()
)

// kindKeys is the spec's one table of op kinds: the key that declares an
// op of the kind, the keys such an op may have beyond opCommon (host steps:
// per step, in hostKeys) and how the loader reads one. Every kind of
// dag.OpKinds() has an entry (TestKindKeys checks); a kind a spec cannot
// write has an empty key and says why.
var kindKeys = map[dag.OpKind]kindEntry{
	dag.Alloc:    {key: "alloc", read: (*opReader).lifetimeOp},
	dag.Free:     {key: "free", read: (*opReader).lifetimeOp},
	dag.Copy:     {key: "copy", read: (*opReader).copyOp},
	dag.Fill:     {key: "fill", read: (*opReader).fillOp},
	dag.Memset2D: {key: "memset2d", read: (*opReader).memset2DOp},
	dag.Launch:   {key: "launch", fields: launchKeys, read: (*opReader).launchOp},
	dag.Host:     {key: "host", read: (*opReader).hostOp},
	dag.Gemm:     {key: "gemm", read: (*opReader).gemmOp},
	dag.AllReduce: {key: "all_reduce", read: collective(func(b *dag.Builder, a collectiveArgs) *dag.Op {
		if a.split > 0 {
			return b.AllReduce(a.view, a.red, dag.SplitInto(a.split))
		}
		return b.AllReduce(a.view, a.red)
	})},
	dag.AllGather:     {key: "all_gather", read: collective(func(b *dag.Builder, a collectiveArgs) *dag.Op { return b.AllGather(a.in, a.out) })},
	dag.ReduceScatter: {key: "reduce_scatter", read: collective(func(b *dag.Builder, a collectiveArgs) *dag.Op { return b.ReduceScatter(a.in, a.out, a.red) })},
	dag.Broadcast:     {key: "broadcast", read: collective(func(b *dag.Builder, a collectiveArgs) *dag.Op { return b.Broadcast(a.view, a.rank) })},
	dag.Send:          {key: "send", read: collective(func(b *dag.Builder, a collectiveArgs) *dag.Op { return b.Send(a.view, a.rank) })},
	dag.Recv:          {key: "recv", read: collective(func(b *dag.Builder, a collectiveArgs) *dag.Op { return b.Recv(a.view, a.rank) })},
	dag.While:         {key: "while", fields: whileKeys}, // read: see control.go's init
	dag.If:            {key: "if", fields: ifKeys},
	dag.Task:          {why: "stream tasks carry Go functions: declare them with dag.Builder.Task"},
}

type kindEntry struct {
	key    string
	fields []string
	read   readFunc
	why    string // for a kind with no key: how a spec gets one
}

// readFunc reads op d, whose mapping is f and whose kind's value is n,
// into an op of builder b; nil when it is wrong (and reported).
type readFunc func(rd *opReader, b *dag.Builder, d *opDecl, f fields, n *node, what subject) *dag.Op

// entryOf returns the entry whose key is key.
func entryOf(key string) (kindEntry, bool) {
	k, ok := kindOfKey[key]
	if !ok {
		return kindEntry{}, false
	}
	return kindKeys[k], true
}

// kindOfKey inverts kindKeys, for the loader's one lookup per op.
var kindOfKey = func() map[string]dag.OpKind {
	m := make(map[string]dag.OpKind, len(kindKeys))
	for k, e := range kindKeys {
		if e.key != "" {
			m[e.key] = k
		}
	}
	return m
}()

// opKeys are the keys an op of kind may have (host steps: of host step
// step), memoised per loader in a list: there are a few kinds and steps.
func (l *loader) opKeys(kind, step string) []string {
	for _, c := range l.keyCache {
		if c.kind == kind && c.step == step {
			return c.keys
		}
	}
	keys := opKeys(kind, step)
	l.keyCache = append(l.keyCache, opKeysOf{kind, step, keys})
	return keys
}

type opKeysOf struct {
	kind, step string
	keys       []string
}

// opKeys are the keys an op of kind may have (host steps: of host step step).
func opKeys(kind, step string) []string {
	keys := append([]string{kind}, opCommon...)
	for _, e := range kindKeys {
		if e.key == kind {
			keys = append(keys, e.fields...)
		}
	}
	if kind == "host" {
		keys = append(keys, hostKeys[step]...)
	}
	return keys
}

// anyOpKeys are the keys some op may have, for suggestions when an op's
// kind is unknown.
func anyOpKeys() []string {
	keys := append(append([]string{}, opKindKeys...), opCommon...)
	keys = append(keys, launchKeys...)
	keys = append(keys, whileKeys...)
	keys = append(keys, ifKeys...)
	for _, s := range hostSteps {
		for _, k := range hostKeys[s] {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// dtypeNames are the names of dag's element types, in dag's order.
func dtypeNames() []string {
	var out []string
	for _, d := range dag.DTypes() {
		out = append(out, d.String())
	}
	return out
}

// reductionNames are the names of dag's reductions, in dag's order.
func reductionNames() []string {
	var out []string
	for _, r := range dag.Reductions() {
		out = append(out, r.String())
	}
	return out
}

// kindList names the op kinds for hints: "copy, fill, ... or recv".
var kindList = strings.Join(opKindKeys[:len(opKindKeys)-1], ", ") + " or " + opKindKeys[len(opKindKeys)-1]
