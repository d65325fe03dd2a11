package spec

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/dagrun/dagrun/dag"
)

// Spec is a loaded pipeline: its graph, how to run it and what to report.
type Spec struct {
	File     string
	Graph    *dag.Graph
	Run      RunSettings
	Outputs  []Output
	Warnings []*Error // problems that do not stop a run, by position

	// Stdout receives what host steps print (checksum lines); nil discards it.
	Stdout io.Writer
	// SaveDir is the directory relative save paths (of save host steps and
	// outputs) are taken from; empty means the working directory.
	SaveDir string

	where map[string]Position // op name -> where it is declared
	mu    sync.Mutex          // serialises host steps' writes to Stdout
}

// RunSettings are a spec's run section, with defaults filled in.
type RunSettings struct {
	Streams           int    // compute streams per device and priority; 0 leaves it to the planner
	SharedCopyStreams bool   // one copy stream for every direction
	Repeat            int    // how many times to run the graph; at least 1
	Graph             bool   // capture the run as a CUDA graph and replay it
	Backend           string // auto, cpu or cuda
}

// Output is a buffer whose contents are reported after a run.
type Output struct {
	Buffer *dag.Buffer
	Save   string // file to write the contents to, if not empty (see Spec.SavePath)
	Pos    Position
}

// OpPos returns where the op called name is declared. Ops that the graph
// adds on its own (the alloc and free of a temporary buffer) are placed at
// their buffer.
func (s *Spec) OpPos(name string) (Position, bool) {
	p, ok := s.where[name]
	return p, ok
}

// SavePath is where a save path written in the spec is written to.
func (s *Spec) SavePath(path string) string {
	if filepath.IsAbs(path) || s.SaveDir == "" {
		return path
	}
	return filepath.Join(s.SaveDir, path)
}

// Load reads and parses the spec file at path.
func Load(path string) (*Spec, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, src)
}

// Parse parses the spec src, read from filename; files the spec names are
// taken relative to filename's directory. The error, if any, joins one
// *Error per problem, ordered by position (see Errors). Even then the Spec
// returned holds the warnings found, but no Graph.
func Parse(filename string, src []byte) (*Spec, error) {
	l := &loader{
		reader:  reader{file: filename},
		dir:     filepath.Dir(filename),
		b:       dag.New(),
		bufs:    map[string]*bufDecl{},
		kernels: map[string]*kernelDecl{},
		opNames: map[string]*opDecl{},
	}
	l.spec = &Spec{File: filename, Run: RunSettings{Repeat: 1, Backend: "auto"}}
	root := l.document(src)
	if root != nil {
		l.load(root)
	}
	sortErrors(l.warns)
	l.spec.Warnings = l.warns
	if len(l.errs) > 0 {
		return l.spec, joinErrors(l.errs)
	}
	return l.spec, nil
}

// document parses src and returns its one document's body.
func (l *loader) document(src []byte) ast.Node {
	f, err := parser.ParseBytes(src, 0)
	if err != nil {
		l.syntaxError(err)
		return nil
	}
	var body ast.Node
	for _, d := range f.Docs {
		if d == nil || d.Body == nil {
			continue
		}
		if body != nil {
			l.errorf(d.Body, "put the whole spec in one document", "a spec is one YAML document; this is a second one")
			return nil
		}
		body = d.Body
	}
	if body == nil {
		l.errorf(nil, "declare buffers and ops", "the spec is empty")
		return nil
	}
	l.collectAnchors(body)
	return body
}

// loader builds a Spec from a document, remembering where each buffer,
// kernel and op is written so that the graph's errors can point there.
type loader struct {
	reader
	dir  string
	spec *Spec
	b    *dag.Builder

	bufs      map[string]*bufDecl
	bufOrder  []string
	kernels   map[string]*kernelDecl
	kernOrder []string
	ops       []*opDecl
	opNames   map[string]*opDecl // explicitly named ops
	opsNode   ast.Node
}

// bufDecl is a declared buffer; buf is nil when the declaration is wrong.
type bufDecl struct {
	buf    *dag.Buffer
	node   ast.Node
	fields map[string]ast.Node
}

type kernelDecl struct {
	k    *dag.Kernel
	node ast.Node
}

func (l *loader) load(root ast.Node) {
	top, ok := l.mapping(root, "the spec", topKeys)
	if top.node == nil {
		return
	}
	if n, ok := top.get("run"); ok {
		l.runSettings(n)
	}
	if n, ok := top.get("buffers"); ok {
		l.buffers(n)
	}
	if n, ok := top.get("kernels"); ok {
		l.kernelDecls(n)
	}
	if n, ok := top.get("ops"); ok {
		l.opsNode = top.keyNode("ops")
		l.opList(n)
	} else if !top.has("ops") {
		l.errorf(top.node, "add an ops: list of copy, fill, launch, alloc, free and host steps", "the spec has no ops")
	}
	if n, ok := top.get("outputs"); ok {
		l.outputs(n)
	}
	if !ok || len(l.errs) > 0 {
		return
	}
	l.nameOps()
	l.addAfter()
	l.pageableCopies()
	if len(l.errs) > 0 {
		return
	}
	g, err := l.b.Build()
	if err != nil {
		l.graphErrors(err)
		return
	}
	l.spec.Graph = g
	l.spec.where = map[string]Position{}
	for _, o := range l.ops {
		if o.op != nil {
			l.spec.where[o.op.Name] = l.pos(o.node)
		}
	}
	for _, o := range g.Ops {
		if _, ok := l.spec.where[o.Name]; !ok && (o.Kind == dag.Alloc || o.Kind == dag.Free) {
			if d := l.bufs[o.Buffer().Name]; d != nil {
				l.spec.where[o.Name] = l.pos(d.node)
			}
		}
	}
}

func (l *loader) runSettings(n ast.Node) {
	f, _ := l.mapping(n, "run", runKeys)
	run := &l.spec.Run
	for _, e := range f.list {
		what := "run." + e.key
		switch e.key {
		case "streams":
			if v, ok := l.intIn(e.value, what, 1, 32); ok {
				run.Streams = v
			}
		case "shared_copy_streams":
			run.SharedCopyStreams, _ = l.boolean(e.value, what)
		case "repeat":
			if v, ok := l.intIn(e.value, what, 1, 1<<31-1); ok {
				run.Repeat = v
			}
		case "graph":
			run.Graph, _ = l.boolean(e.value, what)
		case "backend":
			if v, ok := l.oneOf(e.value, what, backends); ok {
				run.Backend = v
			}
		}
	}
}

func (l *loader) outputs(n ast.Node) {
	items, _ := l.sequence(n, "outputs")
	for _, it := range items {
		it = l.resolve(it)
		if it == nil {
			continue
		}
		out := Output{Pos: l.pos(it)}
		var bufNode ast.Node = it
		if _, isStr := scalarString(it); !isStr {
			f, ok := l.mapping(it, "an output", outputKeys)
			if !ok {
				continue
			}
			if bufNode, ok = f.get("buffer"); !ok {
				l.errorf(f.node, "name the buffer: {buffer: name, save: file}", "output has no buffer")
				continue
			}
			if s, ok := f.get("save"); ok {
				if out.Save, ok = l.str(s, "save"); ok && out.Save == "" {
					l.errorf(s, "name a file or leave save out", "save path is empty")
				}
			}
		}
		d := l.bufferRef(bufNode, "output")
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

// bufferRef reads a buffer name and returns its declaration, reporting
// unknown names; nil when there is none.
func (l *loader) bufferRef(n ast.Node, what string) *bufDecl {
	name, ok := l.str(n, what+" buffer")
	if !ok {
		return nil
	}
	d := l.bufs[name]
	if d == nil {
		l.errorf(n, suggest(name, l.bufOrder), "%s names unknown buffer %q", what, name)
	}
	return d
}

// path resolves a file named in the spec against the spec's directory.
func (l *loader) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(l.dir, p)
}

// absPath is path made absolute, so that backends find the file from any
// working directory.
func (l *loader) absPath(p string) string {
	full := l.path(p)
	if abs, err := filepath.Abs(full); err == nil {
		return abs
	}
	return full
}

// readFile reads a regular file named in the spec, at most limit bytes.
func (l *loader) readFile(n ast.Node, what, p string, limit int64) ([]byte, bool) {
	full := l.path(p)
	fi, err := os.Stat(full)
	if err != nil {
		l.errorf(n, "paths are relative to the spec's directory", "%s %s: %v", what, p, unwrapPath(err))
		return nil, false
	}
	if !fi.Mode().IsRegular() {
		l.errorf(n, "name a regular file", "%s %s is not a regular file", what, p)
		return nil, false
	}
	if fi.Size() > limit {
		l.errorf(n, "", "%s %s holds %d bytes, more than %d", what, p, fi.Size(), limit)
		return nil, false
	}
	data, err := os.ReadFile(full)
	if err != nil {
		l.errorf(n, "", "%s %s: %v", what, p, unwrapPath(err))
		return nil, false
	}
	return data, true
}

// unwrapPath drops the path from an *os.PathError, which the message names
// already.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

func (l *loader) pageableCopies() {
	for _, o := range l.ops {
		if o.op == nil || !o.op.SyncCopy() {
			continue
		}
		host, dev := o.op.Access[0].Buf, o.op.Access[1].Buf
		if host.Placement != dag.Pageable {
			host, dev = dev, host
		}
		hint := fmt.Sprintf("make %s placement: pinned", host.Name)
		msg := fmt.Sprintf("copy %q between pageable host memory (%s) and device %d memory (%s) is synchronous and cannot be captured in a graph",
			o.op.Name, host.Name, dev.Device, dev.Name)
		if l.spec.Run.Graph {
			l.errorf(o.node, hint, "%s; run.graph is true", msg)
		} else {
			l.warnf(o.node, hint, "%s", msg)
		}
	}
}
