package spec

import (
	"fmt"
	"strconv"

	"github.com/dagrun/dagrun/dag"
)

// maxKernelFile bounds the CUDA C, PTX and cubin files a spec may name.
const maxKernelFile = 64 << 20

// kernelSet is the spec's declared kernels, by name and in order.
type kernelSet struct {
	kernels   map[string]*kernelDecl
	kernOrder []string
}

func (l *loader) kernelDecls(n *node) {
	f, _ := l.entries(n, about("kernels"))
	l.kernels = make(map[string]*kernelDecl, len(f.list))
	for i, e := range f.list {
		switch {
		case i == MaxKernels:
			l.errorf(e.keyN, "split the work into several specs", "the spec has more than %d kernels", MaxKernels)
			return
		case !l.checkName(e.keyN, "kernel", e.key):
			continue
		case dag.LookupBuiltin(e.key) != nil:
			l.errorf(e.keyN, "builtins need no declaration; give your kernel another name", "kernel %q is a builtin", e.key)
			continue
		}
		d := &kernelDecl{node: e.keyN}
		l.kernels[e.key] = d
		l.kernOrder = append(l.kernOrder, e.key)
		if e.value == nil {
			continue
		}
		if k, ok := l.kernel(e.key, e.value); ok {
			d.k = l.b.Kernel(k)
		}
	}
}

// kernel reads one kernel declaration: its source (CUDA C inline or in a
// file, a PTX file or a cubin file), entry symbol and parameters.
func (l *loader) kernel(name string, n *node) (*dag.Kernel, bool) {
	what := about(fmt.Sprintf("kernel %q", name))
	f, ok := l.mapping(n, what, kernelKeys)
	if f.node == nil {
		return nil, false
	}
	k := &dag.Kernel{Name: name}
	var sources []string
	for _, s := range sourceKeys {
		if f.has(s) {
			sources = append(sources, s)
		}
	}
	if len(sources) != 1 {
		l.errorf(f.node, "give one of cuda (inline CUDA C), cuda_file, ptx or cubin",
			"%s needs exactly one source, has %d", what, len(sources))
		return nil, false
	}
	src, _ := f.get(sources[0])
	text, okS := l.str(src, what.and(sources[0]))
	ok = ok && okS
	if okS {
		switch sources[0] {
		case "cuda":
			k.Source, k.Code = dag.CUDAC, text
			if text == "" {
				l.errorf(src, "write the kernel's CUDA C source", "%s cuda source is empty", what)
				ok = false
			}
		case "cuda_file":
			data, okF := l.paths.readFile(src, what.and("cuda_file"), text, maxKernelFile)
			k.Source, k.Code = dag.CUDAC, string(data)
			ok = ok && okF
		case "ptx", "cubin":
			_, okF := l.paths.readFile(src, what.and(sources[0]), text, maxKernelFile)
			ok = ok && okF
			k.Source, k.Path = dag.PTX, l.paths.absPath(text)
			if sources[0] == "cubin" {
				k.Source = dag.Cubin
			}
		}
	}
	if v, has := f.get("entry"); has {
		entry, okE := l.str(v, what.and("entry"))
		ok = ok && okE
		k.Entry = entry
	}
	if v, has := f.get("params"); has {
		params, okP := l.params(v, what)
		ok = ok && okP
		k.Params = params
	}
	return k, ok
}

func (l *loader) params(n *node, what subject) ([]dag.Param, bool) {
	items, ok := l.sequence(n, what.and("params"))
	var params []dag.Param
	seen := map[string]bool{}
	for i, it := range items {
		if i == MaxArgs {
			l.errorf(it, "pass large inputs in buffers", "%s has more than %d params", what, MaxArgs)
			return nil, false
		}
		pw := what.and("param").and(strconv.Itoa(i))
		f, okF := l.mapping(it, pw, paramKeys)
		if f.node == nil {
			ok = false
			continue
		}
		var p dag.Param
		nameN, hasName := f.get("name")
		typeN, hasType := f.get("type")
		if !hasName || !hasType {
			l.errorf(f.node, "write {name: x, type: buffer, mode: inout} or {name: n, type: i64}", "%s needs a name and a type", pw)
			ok = false
			continue
		}
		name, okN := l.str(nameN, pw.and("name"))
		okN = okN && l.checkName(nameN, "parameter", name)
		if okN && seen[name] {
			l.errorf(nameN, "give each parameter its own name", "parameter %q is declared twice", name)
			okN = false
		}
		seen[name] = true
		typ, okT := l.oneOf(typeN, pw.and("type"), paramTypes)
		p.Name = name
		p.Kind, _ = dag.ParseParamKind(typ)
		okM := true
		if v, has := f.get("mode"); has {
			if okT && p.Kind != dag.BufferParam {
				l.errorf(v, "only buffer parameters have a mode", "%s is of type %s and has no mode", pw, typ)
				okM = false
			} else {
				var m string
				m, okM = l.oneOf(v, pw.and("mode"), modes)
				p.Mode = parseMode(m)
			}
		} else if p.Kind == dag.BufferParam {
			p.Mode = dag.ReadWrite
		}
		ok = ok && okF && okN && okT && okM
		params = append(params, p)
	}
	return params, ok
}

func parseMode(s string) dag.Mode {
	switch s {
	case "in":
		return dag.Read
	case "out":
		return dag.Write
	case "inout":
		return dag.ReadWrite
	}
	return 0
}
