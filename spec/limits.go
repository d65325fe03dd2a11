package spec

// Limits on what a spec may hold, so that no input, however written, makes
// loading take more than time and memory linear in its size. Each is
// reported as an error at the position that crosses it (see the package
// documentation, which gives each value).
const (
	// MaxSpecBytes is the largest spec file: about 2 million ops.
	MaxSpecBytes = 128 << 20
	// MaxDepth is the deepest nesting of mappings and lists; a spec needs 6.
	MaxDepth = 64
	// MaxNameLen is the longest name of a buffer, kernel, op or parameter.
	MaxNameLen = 256
	// MaxBuffers, MaxKernels and MaxOps bound the declarations of a spec,
	// MaxArgs the parameters of a kernel and the arguments of a launch.
	MaxBuffers = 1 << 20
	MaxKernels = 1 << 16
	MaxOps     = 1 << 22
	MaxArgs    = 1024
	// MaxErrors is how many problems are reported one by one; the rest
	// are counted in one last error.
	MaxErrors = 1000
	// MaxCost is the largest cost an op may be given.
	MaxCost = 24 * 60 * 60 * 1e9 // 24 h in nanoseconds
	// MaxNesting is how deep loops and branches may nest: bodies within
	// bodies. Their ops count towards MaxOps.
	MaxNesting = 16
	// MaxWorld is the most ranks run.world (and WithRank) may name.
	MaxWorld = 1 << 16
)

// maxAliasNodes bounds the nodes that following aliases may bring into
// the reading of one spec, so that nested aliases (a "billion laughs") or
// an alias inside its own anchor cannot make loading take forever.
const maxAliasNodes = 1 << 20

// maxUnknownAliases bounds the aliases naming no anchor that are reported
// one by one: the YAML parser stops at each, and the loader parses again.
const maxUnknownAliases = 8
