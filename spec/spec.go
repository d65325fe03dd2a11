package spec

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/dagrun/dagrun/dag"
)

// Spec is a loaded pipeline: its graph, how to run it and what to report.
type Spec struct {
	File     string
	Graph    *dag.Graph
	Run      RunSettings
	Outputs  []Output
	Saves    []SaveStep // the save host steps, in declaration order
	Warnings []*Error   // problems that do not stop a run, by position
	// Rank is the rank whose program this is (WithRank; 0 by default):
	// {rank} in its paths and per_rank random inits are this rank's.
	Rank int
	// Params are the parameters the spec declares, sorted by name, each
	// with the value this load used.
	Params []Param

	// Stdout receives what host steps print (checksum lines); nil discards it.
	Stdout io.Writer
	// SaveDir is the directory the spec's writes (save host steps and
	// outputs' save) resolve against and are confined to; empty means the
	// spec's directory (the working directory for a spec read from stdin).
	// WithSaveDir sets it; setting it after Parse still takes effect.
	SaveDir string

	files  files      // where the spec's paths resolve, and what may be touched
	reads  []string   // the files the spec reads, absolute and clean
	writes []string   // the files the spec writes, absolute and clean
	ops    opSites    // where each op of the graph is declared, and how messages name it
	mu     sync.Mutex // serialises host steps' writes to Stdout
	src    []byte     // the spec's text and options, for ForRank
	opts   []Option
	// again is what At reuses of this load, for a spec with parameters
	// that loaded without errors; nil otherwise.
	again *again
}

// RunSettings are a spec's run section, with defaults filled in.
type RunSettings struct {
	Streams           int  // compute streams per device and priority; 0 leaves it to the planner
	SharedCopyStreams bool // one copy stream for every direction
	Repeat            int  // how many times to run the graph; at least 1
	Graph             bool // capture the run as a CUDA graph and replay it
	// GraphSet says run.graph was given: false there means never capture;
	// without it a runner may capture repeated runs automatically.
	GraphSet bool
	Backend  string // auto, cpu or cuda (aliases such as gpu are written as what they mean)
	// World is the number of ranks that run the spec, each its own copy
	// of the graph on its own device (run.world, or WithRank's world); 1
	// by default.
	World int
	// Memory is run.memory: the budgets the planner keeps each memory
	// within (planner.MemoryBudget), in bytes; 0 for none.
	Memory MemoryBudget
	// CollectiveSMs is run.collective_sms: the SMs a collective's kernels
	// hold, which the GEMMs the planner runs beside one leave free
	// (planner.CollectiveSMs); 0 for none.
	CollectiveSMs int
}

// MemoryBudget is a spec's run.memory: the most bytes a plan may need of
// each device's memory (every device's), of pinned and of pageable host
// memory; 0 leaves a memory unbounded.
type MemoryBudget struct {
	Device, Pinned, Pageable int64
}

// SaveStep is a save host step: op writes View's bytes to Path (as the
// spec writes it; SavePath says where that is) at every run.
type SaveStep struct {
	Op   *dag.Op
	View dag.View
	Path string
}

// Output is a buffer whose contents are reported after a run.
type Output struct {
	Buffer *dag.Buffer
	Save   string // file to write the contents to (with Spec.WriteFile), if not empty
	Pos    Position
}

// OpPos returns where the op called name is declared. Ops that the graph
// adds on its own (the alloc and free of a temporary buffer) are placed at
// their buffer.
func (s *Spec) OpPos(name string) (Position, bool) {
	site, ok := s.ops.find(name)
	if !ok {
		return Position{}, false
	}
	return Position{File: s.ops.file, Line: int(site.line), Col: int(site.col)}, true
}

// Files returns the files the spec reads (init files, kernel sources) and
// the files it writes (save host steps, outputs' save), as absolute, clean
// paths, so that a command can keep its own outputs off them.
func (s *Spec) Files() (reads, writes []string) {
	return slices.Clone(s.reads), slices.Clone(s.writes)
}

// SavePath is where a save path written in the spec is written to: path
// joined to the save directory (see SaveDir). WriteFile refuses the paths
// that leave it.
func (s *Spec) SavePath(path string) string {
	return filepath.Join(s.saveDir(), filepath.FromSlash(path))
}

func (s *Spec) saveDir() string {
	if s.SaveDir != "" {
		return s.SaveDir
	}
	return s.files.base
}

// An Option changes how Load and Parse read a spec.
type Option func(*options)

type options struct {
	saveDir     string
	baseDir     string
	allowed     []string
	rank, world int
	set         map[string]int64 // WithParam's values
	checkRange  bool             // CheckParamRange
	again       *again           // what an earlier load of src left for this one (At)
}

// WithSaveDir makes the spec's writes resolve against dir (the CLI's
// --save-dir) instead of the spec's directory.
func WithSaveDir(dir string) Option { return func(o *options) { o.saveDir = dir } }

// AllowPath lets the spec read and write the tree under dir too, beyond
// its own directory and the save directory (the CLI's --allow-path). It
// may be given more than once.
func AllowPath(dir string) Option { return func(o *options) { o.allowed = append(o.allowed, dir) } }

// WithBaseDir makes the spec's reads resolve against dir instead of the
// directory of its file name: for a spec read from stdin, the working
// directory.
func WithBaseDir(dir string) Option { return func(o *options) { o.baseDir = dir } }

// WithRank makes the spec rank's program in a world of world ranks: {rank}
// in its paths becomes rank, and random inits with per_rank: true take
// rank's stream. world overrides the spec's run.world (the CLI's --world);
// 0 keeps it. A world of N ranks runs N graphs, one per rank, each parsed
// with its WithRank (or made with Spec.ForRank). rank must be below the
// world, which is from 1 to MaxWorld.
func WithRank(rank, world int) Option {
	return func(o *options) { o.rank, o.world = rank, world }
}

// ForRank parses the spec again as rank's program in the spec's world
// (Spec.Run.World, which WithRank may have set), with the options it was
// parsed with; s.Stdout and s.SaveDir carry over.
func (s *Spec) ForRank(rank int) (*Spec, error) {
	opts := append(slices.Clip(s.opts), WithRank(rank, s.Run.World), WithSaveDir(s.SaveDir))
	r, err := Parse(s.File, s.src, opts...)
	if r != nil {
		r.Stdout = s.Stdout
	}
	return r, err
}

// ExpandRank writes rank in place of every {rank} in path: the rule for
// every path a rank writes or reads.
func ExpandRank(path string, rank int) string {
	return strings.ReplaceAll(path, rankPattern, strconv.Itoa(rank))
}

const rankPattern = "{rank}"

// Load reads and parses the spec file at path.
func Load(path string, opts ...Option) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > MaxSpecBytes {
		s := &Spec{File: path}
		return s, ErrorList{&Error{Pos: Position{File: path, Line: 1, Col: 1}, Msg: fmt.Sprintf("the spec is %d bytes, more than %d", fi.Size(), int64(MaxSpecBytes)), Hint: "split it, or generate it in smaller parts"}}
	}
	// Sized from the file (a regular one; a FIFO says 0) so that the read
	// fills one buffer instead of growing and copying one several times.
	var buf bytes.Buffer
	if fi.Mode().IsRegular() {
		buf.Grow(int(fi.Size()) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(io.LimitReader(f, MaxSpecBytes+1)); err != nil {
		return nil, err
	}
	return Parse(path, buf.Bytes(), opts...)
}

// Parse parses the spec src, read from filename; files the spec names are
// taken relative to filename's directory (see the package documentation
// for the rule and the options that change it). The error, if any, is an
// ErrorList with one *Error per problem, ordered by position (see Errors).
// Even then the Spec returned holds the warnings found, but no Graph.
func Parse(filename string, src []byte, opts ...Option) (*Spec, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	l := &loader{
		reader: reader{file: filename, aliasBudget: maxAliasNodes, suggestBudget: suggestCells},
		b:      dag.New(),
	}
	l.spec = &Spec{File: filename, Run: RunSettings{Repeat: 1, Backend: "auto", World: 1}, SaveDir: o.saveDir,
		Rank: o.rank, src: src, opts: opts}
	r, p := &l.reader, &l.parts
	l.kernelSet = &p.kernels
	p.views = views{reader: r}
	l.views = &p.views
	p.paths = paths{reader: r, spec: l.spec}
	l.paths = &p.paths
	p.decls = decls{reader: r, kernelSet: l.kernelSet, spec: l.spec, views: l.views}
	l.decls = &p.decls
	p.kinds = opReader{reader: r, kernelSet: l.kernelSet, spec: l.spec, views: l.views, paths: l.paths, decls: l.decls, body: l.body}
	l.kinds = &p.kinds
	if o.again != nil {
		l.spec.files = o.again.files
		l.reader.exprs = o.again.exprs
		l.recipes = o.again.recipes
	} else {
		l.spec.files = newFiles(filename, o)
		l.reader.exprs = &exprCache{}
		l.rec = &recorder{}
	}
	l.worldOpt = o.world
	l.set, l.rangeCheck = o.set, o.checkRange
	if len(src) > MaxSpecBytes {
		l.errorf(nil, "split it, or generate it in smaller parts", "the spec is %d bytes, more than %d", len(src), MaxSpecBytes)
	} else {
		var root *node
		if o.again != nil {
			root = o.again.doc
		} else {
			root = document(&l.reader, src)
		}
		if root != nil {
			l.load(root)
			switch {
			case len(l.spec.Params) == 0:
			case o.again != nil:
				l.spec.again = o.again
			default:
				// Kept whole for At (opList).
				l.spec.again = &again{doc: root, exprs: l.reader.exprs, files: l.spec.files, recipes: l.rec.done(l.valueReads)}
			}
		}
	}
	if o.checkRange && len(l.errs) == 0 && len(l.spec.Params) > 0 {
		l.errs = append(l.errs, extremeErrors(filename, src, opts, l.spec.Params)...)
	}
	ErrorList(l.warns).Sort()
	l.spec.Warnings = l.warns
	if len(l.paths.reads) > 0 {
		l.spec.reads = slices.Sorted(maps.Keys(l.paths.reads))
	}
	if len(l.paths.writes) > 0 {
		l.spec.writes = slices.Sorted(maps.Keys(l.paths.writes))
	}
	if len(l.errs) > 0 {
		l.spec.again = nil
		errs := ErrorList(l.errs)
		errs.Sort()
		if l.dropped > 0 {
			last := errs[len(errs)-1]
			errs = append(errs, &Error{Pos: last.Pos, Msg: fmt.Sprintf("%d more problems are not listed", l.dropped), Hint: "fix these first"})
		}
		return l.spec, errs
	}
	return l.spec, nil
}

// extremeErrors loads the spec again with every parameter at its least
// value, then at its greatest, and returns the errors of those loads not
// already found, each saying at which values it happens.
func extremeErrors(filename string, src []byte, opts []Option, params []Param) []*Error {
	var errs []*Error
	seen := map[string]bool{}
	for _, greatest := range []bool{false, true} {
		// The loads at the extremes check their own expressions but not
		// the range again.
		at := append(slices.Clip(opts), func(o *options) { o.checkRange = false })
		var values []string
		for _, p := range params {
			v := p.first()
			if greatest {
				v = p.Max / p.MultipleOf * p.MultipleOf
			}
			at = append(at, WithParam(p.Name, v))
			values = append(values, fmt.Sprintf("%s = %d", p.Name, v))
		}
		_, err := Parse(filename, src, at...)
		for _, e := range Errors(err) {
			key := e.Pos.String() + e.Msg
			if seen[key] {
				continue
			}
			seen[key] = true
			c := *e
			c.Msg += " (with " + strings.Join(values, ", ") + ")"
			errs = append(errs, &c)
		}
	}
	return errs
}

// loader builds a Spec from a document, remembering where each buffer,
// kernel and op is written so that the graph's errors can point there. Its
// parts each hold what they use: the shared reader of YAML nodes (values
// and positioned errors) and, where they need them, the parts they read
// from (views.go, files.go, decls.go, ops.go).
type loader struct {
	reader
	*kernelSet
	spec *Spec
	b    *dag.Builder

	views *views
	paths *paths
	decls *decls
	kinds *opReader

	keyCache   []opKeysOf       // see opKeys
	worldOpt   int              // WithRank's world; 0: run.world's
	set        map[string]int64 // WithParam's values
	rangeCheck bool             // CheckParamRange
	worldNode  *node            // run.world, when the spec sets it
	// rec keeps the load's recipes, where it is the first of the spec's
	// text and the spec has parameters; recipes are the first load's,
	// which this one makes its buffers and ops of, when it has them.
	rec     *recorder
	recipes *recipes
	nBodies int32 // bodies numbered so far
	nesting int   // bodies being read, one within the other

	// The parts the fields above point to, in the loader's allocation.
	parts struct {
		kernels kernelSet
		views   views
		paths   paths
		decls   decls
		kinds   opReader
	}
}

// bufDecl is a declared buffer; buf is nil when the declaration is wrong.
type bufDecl struct {
	buf    *dag.Buffer
	node   *node
	fields fieldLocs
	place  int32 // in views.bufOrder
}

type kernelDecl struct {
	k    *dag.Kernel
	node *node
}

func (l *loader) load(root *node) {
	top, ok := l.mapping(root, about("the spec"), topKeys)
	if top.node == nil {
		return
	}
	if n, ok := top.get("params"); ok {
		if l.recipes != nil {
			l.declareParams(l.recipes.paramsN, l.recipes.params, l.set, l.rangeCheck)
		} else {
			l.specParams(n, l.set, l.rangeCheck)
		}
	} else if len(l.set) > 0 {
		for _, name := range slices.Sorted(maps.Keys(l.set)) {
			l.errorf(top.node, "declare it under params:, or leave out --set", "--set %s: the spec declares no parameters", name)
		}
	}
	if l.reader.params == nil {
		l.rec = nil // a spec without parameters is loaded once
	}
	l.kinds.rec = l.rec
	if n, ok := top.get("run"); ok {
		// Every load reads the run settings: their values are not the
		// recipes' to keep, but for the world, which ranks and peers and
		// paths depend on.
		reads := l.valueReads
		l.worldNode = runSettings(&l.reader, n, &l.spec.Run)
		l.valueReads = reads
		if s, isStr := scalarString(follow(l.worldNode)); isStr && l.rec != nil && mentionsParam(s, l.reader.params) {
			l.rec.bad = true
		}
	}
	l.checkRank(top.node)
	if n, ok := top.get("buffers"); ok {
		if l.recipes != nil {
			l.buffersAgain(l.recipes)
		} else {
			l.buffers(n)
		}
	}
	if n, ok := top.get("kernels"); ok {
		l.kernelDecls(n)
	}
	if n, ok := top.get("ops"); ok {
		l.decls.opsNode = top.keyNode("ops")
		if l.recipes != nil {
			l.opsAgain(l.recipes)
		} else {
			l.opList(n)
		}
	} else if !top.has("ops") {
		l.errorf(top.node, "add an ops: list of copy, fill, launch, alloc, free and host steps", "the spec has no ops")
	}
	if n, ok := top.get("outputs"); ok {
		l.outputs(n)
	}
	if !ok {
		return
	}
	// The graph is built from every op that could be read, so that its
	// problems (cycles above all) come in the same round as the others.
	l.decls.nameOps()
	l.decls.addAfter()
	l.decls.pageableCopies()
	l.decls.kernelsOnCPU()
	g, err := l.b.Build()
	if err != nil {
		l.decls.graphErrors(err)
		return
	}
	if err := g.CheckWorld(l.spec.Run.World); err != nil {
		l.decls.graphErrors(err)
		return
	}
	if l.recipes != nil && l.recipes.sites != nil && len(l.errs) == 0 {
		// Where every op is declared depends on no value: as the first
		// load found, which read every op right too.
		l.spec.ops = *l.recipes.sites
	} else {
		l.decls.opSites(g)
	}
	if l.rec != nil && len(l.errs) == 0 {
		l.rec.sites = &l.spec.ops
	}
	l.decls.leftAllocated(g)
	if len(l.errs) == 0 {
		l.spec.Graph = g
	}
}

// opSites is where the ops of a graph are declared: the loader's names
// of the declarations, kept, and one opSite per declaration, so that a load
// builds no map of its own for OpPos and OpLabel.
type opSites struct {
	file  string
	names map[string]int32 // op name the spec gives -> its site (see find for the others)
	sites []opSite
}

// opSite is where an op is declared, and its index in the ops list when
// the spec does not name it (-1 otherwise).
type opSite struct {
	name      string // the op's name, made up or not
	line, col int32
	index     int32
	inGraph   bool // false for a declaration that is wrong
}

func (s opSites) find(name string) (opSite, bool) {
	i, ok := s.names[name]
	if !ok {
		j, made := madeUp(name, len(s.sites), func(i int) bool { return s.sites[i].index >= 0 && s.sites[i].name == name })
		i, ok = int32(j), made
	}
	if !ok || !s.sites[i].inGraph {
		return opSite{}, false
	}
	return s.sites[i], true
}

// opIndex is how messages name an op the spec does not name.
func opIndex(i int) string { return "ops[" + strconv.Itoa(i) + "]" }

// OpLabel is how messages name the op called name: op "name" when the
// spec names it, ops[i] when the loader made the name up.
func (s *Spec) OpLabel(name string) string {
	if site, ok := s.ops.find(name); ok && site.index >= 0 {
		return opIndex(int(site.index))
	}
	return "op " + strconv.Quote(name)
}

// maxCollectiveSMs bounds run.collective_sms far above any GPU's SMs; the
// planner checks it against the device's.
const maxCollectiveSMs = 4096

// runSettings reads the run section into run and returns the node of
// run.world, when it is set.
func runSettings(r *reader, n *node, run *RunSettings) (world *node) {
	f, _ := r.mapping(n, about("run"), runKeys)
	for _, e := range f.list {
		what := about("run." + e.key)
		switch e.key {
		case "streams":
			if v, ok := r.intIn(e.value, what, 1, 32); ok {
				run.Streams = v
			}
		case "shared_copy_streams":
			run.SharedCopyStreams, _ = r.boolean(e.value, what)
		case "repeat":
			if v, ok := r.intIn(e.value, what, 1, 1<<31-1); ok {
				run.Repeat = v
			}
		case "graph":
			run.Graph, run.GraphSet = r.boolean(e.value, what)
		case "backend":
			if v, ok := backend(r, e.value, what); ok {
				run.Backend = v
			}
		case "world":
			if v, ok := r.intIn(e.value, what, 1, MaxWorld); ok {
				run.World = v
				world = e.value
			}
		case "memory":
			memoryBudget(r, e.value, &run.Memory)
		case "collective_sms":
			if v, ok := r.intIn(e.value, what, 0, maxCollectiveSMs); ok {
				run.CollectiveSMs = v
			}
		}
	}
	return world
}

// memoryBudget reads run.memory: {device: SIZE, pinned: SIZE, pageable:
// SIZE}, each at least one byte.
func memoryBudget(r *reader, n *node, m *MemoryBudget) {
	f, ok := r.mapping(n, about("run.memory"), memoryKeys)
	if !ok {
		return
	}
	for _, e := range f.list {
		what := about("run.memory." + e.key)
		v, ok := r.size(e.value, what)
		if !ok {
			continue
		}
		if v < 1 {
			r.errorf(e.value, "give a budget of at least one byte, or leave it out", "%s is %d bytes", what, v)
			continue
		}
		switch e.key {
		case "device":
			m.Device = v
		case "pinned":
			m.Pinned = v
		case "pageable":
			m.Pageable = v
		}
	}
}

func (l *loader) outputs(n *node) {
	items, _ := l.sequence(n, about("outputs"))
	for _, it := range items {
		it = l.resolve(it)
		if it == nil {
			continue
		}
		out := Output{Pos: l.pos(it)}
		bufNode := it
		if _, isStr := scalarString(it); !isStr {
			f, ok := l.mapping(it, about("an output"), outputKeys)
			if !ok {
				continue
			}
			if bufNode, ok = f.get("buffer"); !ok {
				l.errorf(f.node, "name the buffer: {buffer: name, save: file}", "output has no buffer")
				continue
			}
			if s, ok := f.get("save"); ok {
				if out.Save, ok = l.str(s, about("save")); ok && out.Save == "" {
					l.errorf(s, "name a file or leave save out", "save path is empty")
				} else if ok {
					if out.Save, ok = l.paths.writePath(s, about("output save"), out.Save); !ok {
						out.Save = ""
					}
				}
			}
		}
		d := l.views.bufferRef(bufNode, about("output"))
		if d == nil || d.buf == nil {
			continue
		}
		if d.buf.Temporary {
			l.errorf(bufNode, "make it persistent, or copy it to a persistent buffer", "output %s is a temporary buffer: it does not outlive the run", d.buf.Name)
			continue
		}
		out.Buffer = d.buf
		l.spec.Outputs = append(l.spec.Outputs, out)
	}
}

// backend reads run.backend: one of backends, or an alias of one.
func backend(r *reader, n *node, what subject) (string, bool) {
	s, ok := r.str(n, what)
	if !ok {
		return "", false
	}
	low := strings.ToLower(s)
	if slices.Contains(backends, low) {
		return low, true
	}
	if b, ok := backendAliases[low]; ok {
		return b, true
	}
	hint := r.suggest(s, backends)
	if strings.HasPrefix(hint, "use one of") {
		hint = "use auto, cpu or cuda (gpu means cuda)"
	}
	r.errorf(n, hint, "%s %q is not valid", what, s)
	return "", false
}
