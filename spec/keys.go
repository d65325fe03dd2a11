package spec

import (
	"slices"

	"github.com/dagrun/dagrun/dag"
)

// The keys and values the format accepts. The loader checks specs against
// these tables and a test checks schema.json against them, so the two
// cannot drift apart.
var (
	topKeys    = []string{"run", "buffers", "kernels", "ops", "outputs"}
	runKeys    = []string{"streams", "shared_copy_streams", "repeat", "graph", "backend"}
	bufferKeys = []string{"size", "dtype", "count", "placement", "device", "temporary", "init"}
	initKeys   = []string{"zeros", "value", "random", "file"}
	kernelKeys = []string{"cuda", "cuda_file", "ptx", "cubin", "entry", "params"}
	sourceKeys = []string{"cuda", "cuda_file", "ptx", "cubin"}
	paramKeys  = []string{"name", "type", "mode"}
	viewKeys   = []string{"buffer", "offset", "size", "mode"}
	outputKeys = []string{"buffer", "save"}
	copyKeys   = []string{"from", "to"}
	fillKeys   = []string{"buffer", "value"}
	opKindKeys = []string{"copy", "fill", "launch", "alloc", "free", "host"}
	opCommon   = []string{"name", "after", "priority", "cost", "device"}
	launchKeys = []string{"grid", "block", "shared", "args"}
	hostKeys   = map[string][]string{"checksum": {"reads"}, "save": {"buffer", "path"}, "add": {"buffer", "value"}}
	hostSteps  = []string{"checksum", "save", "add"}
	backends   = []string{"auto", "cpu", "cuda"}
	// backendAliases are the names users try for a backend.
	backendAliases = map[string]string{"gpu": "cuda", "nvidia": "cuda", "device": "cuda", "host": "cpu"}
	placements     = []string{"device", "pinned", "pageable"}
	dtypes         = []string{"u8", "i32", "i64", "f32", "f64"}
	modes          = []string{"in", "out", "inout"}
	paramTypes     = []string{"buffer", "i32", "i64", "f32", "f64"}
	priorities     = []string{"high", "normal", "low"}
	initStrings    = []string{"zeros"}
)

// kindKeys is the spec's entry for each op kind: the key that declares an
// op of the kind and the keys such an op may have beyond opCommon (host
// steps: per step, in hostKeys). Every kind of dag.OpKinds() has an entry
// (a test checks it); a kind a spec could not write directly would have
// an empty key and say so in why.
var kindKeys = map[dag.OpKind]struct {
	key    string
	fields []string
	why    string // for a kind with no key: how a spec gets one
}{
	dag.Alloc:  {key: "alloc"},
	dag.Free:   {key: "free"},
	dag.Copy:   {key: "copy"},
	dag.Fill:   {key: "fill"},
	dag.Launch: {key: "launch", fields: launchKeys},
	dag.Host:   {key: "host"},
	// Declared from Go only, for now.
	dag.Gemm:          {why: "declare GEMMs with dag.Builder.Gemm"},
	dag.AllReduce:     {why: "declare collectives with dag.Builder"},
	dag.AllGather:     {why: "declare collectives with dag.Builder"},
	dag.ReduceScatter: {why: "declare collectives with dag.Builder"},
	dag.Broadcast:     {why: "declare collectives with dag.Builder"},
	dag.Send:          {why: "declare collectives with dag.Builder"},
	dag.Recv:          {why: "declare collectives with dag.Builder"},
	dag.Task:          {why: "stream tasks carry Go functions: declare them with dag.Builder.Task"},
}

// opKeys are the keys an op of kind may have (host steps: of host step
// step), memoised per loader.
func (l *loader) opKeys(kind, step string) []string {
	k := kind + "/" + step
	if keys, ok := l.keyCache[k]; ok {
		return keys
	}
	keys := opKeys(kind, step)
	if l.keyCache == nil {
		l.keyCache = map[string][]string{}
	}
	l.keyCache[k] = keys
	return keys
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
	for _, s := range hostSteps {
		for _, k := range hostKeys[s] {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}
