package spec

import (
	"fmt"
	"strconv"

	"github.com/dagrun/dagrun/dag"
)

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
	// namesShared says that opNames are the recipes' (see ownNames).
	namesShared bool
	opsNode     *node
	bodies      map[*opDecl]bodyOp // the ops of loops' and branches' bodies
}

// opSites records where the ops of g are declared. The alloc and free
// that the graph adds for a temporary buffer are placed at the buffer.
func (ds *decls) opSites(g *dag.Graph) {
	if ds.opNames == nil {
		ds.opNames, ds.namesShared = map[string]int32{}, false
	}
	s := opSites{file: ds.file, names: ds.opNames, sites: make([]opSite, len(ds.ops))}
	add := func(name string, i int32) {
		if ds.namesShared {
			ds.ownNames()
			s.names = ds.opNames
		}
		s.names[name] = i
	}
	for i, d := range ds.ops {
		p := ds.posAt(d.at)
		s.sites[i] = opSite{line: int32(p.Line), col: int32(p.Col), index: -1, inGraph: d.op != nil}
		if d.op != nil {
			s.sites[i].name = d.op.Name
		}
		switch _, inBody := ds.bodies[d]; {
		case d.named:
		case inBody && d.op != nil:
			// Made-up names in bodies are found by name: ops[i] would
			// not say where they are.
			add(d.op.Name, int32(i))
		default:
			s.sites[i].index = d.index
		}
	}
	for _, o := range g.Ops {
		if o.Kind.Info().Lifetime == dag.NoLifetime {
			continue
		}
		if _, ok := s.find(o.Name); ok {
			continue
		}
		if d := ds.views.bufs[o.Buffer().Name]; d != nil {
			p := ds.pos(d.node)
			add(o.Name, int32(len(s.sites)))
			s.sites = append(s.sites, opSite{name: o.Name, line: int32(p.Line), col: int32(p.Col), index: -1, inGraph: true})
		}
	}
	ds.spec.ops = s
}

// leftAllocated refuses temporaries that an explicit alloc allocates and
// no free frees when the graph runs more than once (repeat, or a graph
// replay): the second run's alloc would find the buffer allocated.
func (ds *decls) leftAllocated(g *dag.Graph) {
	if ds.spec.Run.Repeat <= 1 && !ds.spec.Run.Graph {
		return
	}
	live := map[*dag.Buffer]bool{}
	for _, b := range g.LiveAtEnd() {
		live[b] = true
	}
	why := fmt.Sprintf("run.repeat is %d", ds.spec.Run.Repeat)
	if ds.spec.Run.Graph {
		why = "run.graph replays the graph"
	}
	for _, d := range ds.ops {
		if d.op == nil || d.op.Kind.Info().Lifetime != dag.Allocates || !live[d.op.Buffer()] {
			continue
		}
		b := d.op.Buffer().Name
		ds.errorAt(d.at, "add free: "+b+" after its last use, or drop the alloc to let dagrun place both",
			"%s allocates temporary %s and nothing frees it, but %s: the next run would allocate it again", ds.label(d), b, why)
	}
}

// label is how messages name the op d.
func (ds *decls) label(d *opDecl) string {
	if d.named && d.op != nil {
		return "op " + strconv.Quote(d.op.Name)
	}
	return ds.unnamedLabel(d)
}

// kernelsOnCPU refuses launches of CUDA C, PTX and cubin kernels in a spec
// that asks for the cpu backend, which runs only the builtins.
func (ds *decls) kernelsOnCPU() {
	if ds.spec.Run.Backend != "cpu" {
		return
	}
	for _, d := range ds.ops {
		if d.op == nil || d.op.Kernel() == nil || d.op.Kernel().Source == dag.Builtin {
			continue
		}
		k := d.op.Kernel()
		at, _ := d.fields.get("kernel")
		ds.errorAt(at, "set run.backend: cuda (or auto), or launch a builtin kernel",
			"%s launches kernel %s, which is %s code, but run.backend is cpu: the cpu backend runs only the builtins", ds.label(d), k.Name, k.Source)
	}
}

func (ds *decls) pageableCopies() {
	for _, o := range ds.syncCopies {
		if o.op == nil || !o.op.SyncCopy() {
			continue
		}
		host, dev := o.op.Access[0].Buf, o.op.Access[1].Buf
		if host.Placement != dag.Pageable {
			host, dev = dev, host
		}
		hint := fmt.Sprintf("make %s placement: pinned", host.Name)
		msg := fmt.Sprintf("%s: copy between pageable host memory (%s) and device %d memory (%s) is synchronous and cannot be captured in a graph",
			ds.label(o), host.Name, dev.Device, dev.Name)
		if ds.spec.Run.Graph {
			ds.errorAt(o.at, hint, "%s; run.graph is true", msg)
		} else {
			ds.warnAt(o.at, hint, "%s", msg)
		}
	}
}
