package spec

import "github.com/dagrun/dagrun/dag"

// The loader's parts, each holding what it uses: the shared reader of YAML
// nodes (values and positioned errors) and, where it needs them, the
// parts it reads from.

// views resolves the buffer names the spec's ops and outputs write, and
// views of those buffers, once the buffers are read.
type views struct {
	*reader
	bufs     map[string]*bufDecl
	bufOrder []string // declaration order, for suggestions
}

// paths resolves the files the spec reads and writes, and keeps them for
// Spec.Files and the checks that no two writes collide.
type paths struct {
	*reader
	spec   *Spec
	reads  map[string]bool  // cleaned full paths the spec reads
	writes map[string]*node // cleaned full path -> the node naming it
}

// kernelSet is the spec's declared kernels, by name and in order.
type kernelSet struct {
	kernels   map[string]*kernelDecl
	kernOrder []string
}

// decls are the spec's op declarations, in the ops list and in bodies:
// their names and places, for after lists, and to place the graph's own
// errors and the checks made on the built graph.
type decls struct {
	*reader
	*kernelSet
	spec       *Spec
	views      *views
	ops        []*opDecl
	syncCopies []*opDecl        // the ops whose op is a synchronous copy (SyncCopy), in declaration order
	opNames    map[string]int32 // op name the spec gives -> its declaration in ops (see opNamed for the others)
	opsNode    *node
	bodies     map[*opDecl]bodyOp // the ops of loops' and branches' bodies
}

// opReader reads the keys of each op kind (kindKeys' readFuncs) into an
// op of a builder.
type opReader struct {
	*reader
	*kernelSet
	spec     *Spec
	views    *views
	paths    *paths
	decls    *decls
	argNames map[*dag.Kernel][]string // argFields by kernel
	// body reads a body of a loop or branch (loader.body), whose ops are
	// read as the ops list's are.
	body func(d *opDecl, n *node, what subject, key string) (fill func(*dag.Builder), ok bool)
}
