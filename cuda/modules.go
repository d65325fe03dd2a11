package cuda

/*
#include <stdlib.h>
#include "cuda.h"
*/
import "C"

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/dagrun/dagrun/dag"
	"github.com/dagrun/dagrun/executor/device"
)

// Loading: the backend's module cache. A module is loaded once per device
// and kept until the backend closes, keyed by what it holds (the builtin
// library, or a hash of a kernel's CUDA C or of its PTX/cubin file), so
// that sessions of graphs built afresh (a spec parsed again) share it.

// moduleKey names a module by its content.
type moduleKey struct {
	source dag.SourceKind
	sum    [sha256.Size]byte // of the code or file; zero for the builtins
}

// funcKey names an entry of a module.
type funcKey struct {
	module moduleKey
	entry  string
}

var builtinsKey = moduleKey{source: dag.Builtin}

// loadKernels finds the function of every kernel the session's graph
// launches, on each device that launches it, loading modules into the
// backend's cache where they are not there yet.
func (hd *holdings) loadKernels(ctx context.Context) error {
	var err error
	hd.g.Walk(func(op *dag.Op) {
		if err == nil {
			err = hd.loadKernelsOf(ctx, op)
		}
	})
	return err
}

// loadKernelsOf loads the kernels op needs on its device.
func (hd *holdings) loadKernelsOf(ctx context.Context, op *dag.Op) error {
	if op.Control != nil {
		return hd.loadCondKernels(ctx, op)
	}
	needFill64 := op.Kind == dag.Fill && op.Access[0].Buf.Placement == dag.Device && fillNeedsKernel(op)
	if op.Kernel() == nil && !needFill64 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	d, err := hd.device(op.Device)
	if err != nil {
		return err
	}
	if needFill64 {
		if d.fill64, err = hd.b.fill64(d.gpu); err != nil {
			return err
		}
		return nil
	}
	k := op.Launch.Kernel
	if _, ok := d.funcs[k]; ok {
		return nil
	}
	f, err := hd.b.kernel(d.gpu, k)
	if err != nil {
		return fmt.Errorf("kernel %q on device %d: %w", k.Name, d.ordinal, err)
	}
	d.funcs[k] = f
	return nil
}

// loadCondKernels loads the kernels that set the conditions of control op
// op's node (control.go).
func (hd *holdings) loadCondKernels(ctx context.Context, op *dag.Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d, err := hd.device(op.Device)
	if err != nil {
		return err
	}
	for _, k := range condKernels() {
		if _, ok := d.funcs[k]; ok {
			continue
		}
		f, err := hd.b.kernel(d.gpu, k)
		if err != nil {
			f, err = hd.b.condKernelPTX(d.gpu, k, err)
		}
		if err != nil {
			return fmt.Errorf("the kernels of loops and branches on device %d: %w", d.ordinal, err)
		}
		d.funcs[k] = f
	}
	return nil
}

// condKernelPTX loads k from PTX that the driver finishes, when compiling
// it to a cubin failed with first.
func (b *Backend) condKernelPTX(d *gpu, k *dag.Kernel, first error) (C.CUfunction, error) {
	key := moduleKey{source: dag.PTX, sum: sha256.Sum256([]byte("ptx\x00" + k.Code))}
	b.mu.Lock()
	defer b.mu.Unlock()
	m, err := b.module(d, key, func() ([]byte, error) {
		return b.comp.compilePTX(k.Code, k.Name+".cu", d.info.major, d.info.minor)
	})
	if err != nil {
		return nil, errors.Join(first, err)
	}
	return b.drv.function(d.ctx, m, k.EntryName())
}

// fill64 returns device d's kernel for fills of 8-byte patterns.
func (b *Backend) fill64(d *gpu) (C.CUfunction, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.module(d, builtinsKey, nil); err != nil {
		return nil, err
	}
	return d.fill64, nil
}

// kernel returns the function of k on device d.
func (b *Backend) kernel(d *gpu, k *dag.Kernel) (C.CUfunction, error) {
	key := moduleKey{source: k.Source}
	var load func() ([]byte, error)
	switch k.Source {
	case dag.Builtin:
		key = builtinsKey
	case dag.CUDAC:
		key.sum = sha256.Sum256([]byte(k.Code))
		load = func() ([]byte, error) {
			img, err := b.comp.compile(k.Code, k.Name+".cu", d.info.major, d.info.minor)
			return img.data, err
		}
	case dag.PTX, dag.Cubin:
		data, err := readKernelFile(k.Path)
		if err != nil {
			return nil, err
		}
		key.sum = sha256.Sum256(data)
		load = func() ([]byte, error) { return data, nil }
	default:
		return nil, fmt.Errorf("unknown kernel source %s", k.Source)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	fk := funcKey{module: key, entry: k.EntryName()}
	if f, ok := d.funcs[fk]; ok {
		return f, nil
	}
	m, err := b.module(d, key, load)
	if err != nil {
		return nil, err
	}
	f, err := b.drv.function(d.ctx, m, fk.entry)
	var ce *Error
	if errors.As(err, &ce) && ce.Code == codeNotFound {
		return nil, fmt.Errorf("%w (the module has no entry %q: declare it extern \"C\", or set the kernel's entry to its mangled name)", err, fk.entry)
	}
	if err != nil {
		return nil, err
	}
	d.funcs[fk] = f
	return f, nil
}

// module returns the module of key on d, loading the image load returns
// (or, for the builtins, compiling them) the first time. The caller holds
// b.mu.
func (b *Backend) module(d *gpu, key moduleKey, load func() ([]byte, error)) (C.CUmodule, error) {
	if d.modules == nil {
		return nil, fmt.Errorf("cuda: the backend is %w", device.ErrClosed)
	}
	if m, ok := d.modules[key]; ok {
		return m, nil
	}
	what := "module"
	if key == builtinsKey {
		what = "builtin kernels"
		load = func() ([]byte, error) {
			img, err := b.comp.compile(builtinSource, "dagrun_builtins.cu", d.info.major, d.info.minor)
			return img.data, err
		}
	}
	data, err := load()
	if err != nil {
		if key == builtinsKey {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return nil, err
	}
	m, err := b.drv.moduleLoad(d.ctx, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	d.modules[key] = m
	b.live.Modules++
	if key == builtinsKey {
		if d.fill64, err = b.drv.function(d.ctx, m, fill64Kernel); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if d.initRandom, err = b.drv.function(d.ctx, m, initRandomKernel); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	return m, nil
}
