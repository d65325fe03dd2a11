// Package atomicfile writes files whole or not at all: to a temporary
// file beside the target, renamed over it once complete, so that a failure
// leaves the old file or none, never a torn one.
package atomicfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write writes what write produces to path, as a file of mode 0644. A path
// that names a device or a pipe (/dev/null, /dev/stdout, a FIFO) cannot be
// replaced by renaming and is written to directly.
func Write(path string, write func(io.Writer) error) (err error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() && !fi.IsDir() {
		return writeSpecial(path, write)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, unwrapPath(err))
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	// CreateTemp makes the file 0600; what is written is an output like
	// the others.
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, unwrapPath(err))
	}
	return nil
}

func writeSpecial(path string, write func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// unwrapPath drops the temporary file's name from an *os.PathError.
func unwrapPath(err error) error {
	if pe, ok := errors.AsType[*os.PathError](err); ok {
		return pe.Err
	}
	return err
}

// Until is write stopped by ctx: once ctx ends, every write to the writer
// it is given fails, and so does write itself even after its last write,
// so that Write renames nothing over the old file.
func Until(ctx context.Context, write func(io.Writer) error) func(io.Writer) error {
	return func(w io.Writer) error {
		if err := write(ctxWriter{ctx, w}); err != nil {
			return err
		}
		return ctx.Err()
	}
}

// ctxWriter fails every write once ctx ends, so that a long write stops.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (w ctxWriter) Write(p []byte) (int, error) {
	if err := w.ctx.Err(); err != nil {
		return 0, err
	}
	return w.w.Write(p)
}
