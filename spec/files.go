package spec

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/dagrun/dagrun/internal/human"
)

// files is where a spec's paths resolve and which trees it may touch: its
// own directory for reads, the save directory for writes, and the trees
// AllowPath names for both.
type files struct {
	base    string   // reads resolve against it (absolute when it can be made so)
	allowed []string // extra trees, absolute
}

func newFiles(filename string, o options) files {
	base := o.baseDir
	if base == "" {
		base = filepath.Dir(filename)
	}
	f := files{base: absDir(base)}
	for _, d := range o.allowed {
		f.allowed = append(f.allowed, absDir(d))
	}
	return f
}

func absDir(d string) string {
	if abs, err := filepath.Abs(d); err == nil {
		return abs
	}
	return filepath.Clean(d)
}

// locate finds the tree a path written in the spec lies in: the path
// relative to dir, or an absolute path or one leaving dir that lies in an
// allowed tree. It returns the root directory and the path inside it, or
// an error saying why the path is refused.
func (f files) locate(dir, p string) (root, rel string, err error) {
	p = filepath.FromSlash(p)
	if !filepath.IsAbs(p) && filepath.IsLocal(p) {
		return dir, p, nil
	}
	full := p
	if !filepath.IsAbs(p) {
		full = filepath.Join(dir, p)
	}
	full = filepath.Clean(full)
	for _, a := range f.allowed {
		if r, err := filepath.Rel(a, full); err == nil && filepath.IsLocal(r) {
			return a, r, nil
		}
	}
	if filepath.IsAbs(p) {
		return "", "", errors.New("is an absolute path")
	}
	return "", "", errors.New("leaves the spec's directory")
}

const pathHint = "paths are relative to the spec's directory and stay inside it; pass --allow-path DIR to allow another tree"

// paths resolves the files the spec reads and writes, and keeps them for
// Spec.Files and the checks that no two writes collide.
type paths struct {
	*reader
	spec   *Spec
	reads  map[string]bool  // cleaned full paths the spec reads
	writes map[string]*node // cleaned full path -> the node naming it
}

// readFile reads a regular file named in the spec, at most limit bytes,
// through an os.Root, so that neither ".." nor a symbolic link takes the
// read out of the tree it is allowed in.
func (ps *paths) readFile(n *node, what subject, p string, limit int64) ([]byte, bool) {
	if p == "" {
		ps.errorf(n, "name a file", "%s is empty", what)
		return nil, false
	}
	dir, rel, err := ps.spec.files.locate(ps.spec.files.base, p)
	if err != nil {
		ps.errorf(n, pathHint, "%s %s %v", what, human.Quote(p), err)
		return nil, false
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		ps.errorf(n, "paths are relative to the spec's directory", "%s %s: %v", what, human.Quote(p), unwrapPath(err))
		return nil, false
	}
	defer root.Close()
	// Check before opening: opening a FIFO blocks until a writer comes.
	// The open is non-blocking too, and the file is checked again once
	// open, so that one swapped in between cannot hang the read either.
	if fi, err := root.Stat(rel); err == nil && !fi.Mode().IsRegular() {
		ps.errorf(n, "name a regular file", "%s %s is not a regular file (it is a %s)", what, human.Quote(p), fileKind(fi.Mode()))
		return nil, false
	}
	file, err := root.OpenFile(rel, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		ps.errorf(n, "paths are relative to the spec's directory", "%s %s: %v", what, human.Quote(p), unwrapPath(err))
		return nil, false
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		ps.errorf(n, "", "%s %s: %v", what, human.Quote(p), unwrapPath(err))
		return nil, false
	}
	if !fi.Mode().IsRegular() {
		ps.errorf(n, "name a regular file", "%s %s is not a regular file (it is a %s)", what, human.Quote(p), fileKind(fi.Mode()))
		return nil, false
	}
	if fi.Size() > limit {
		ps.errorf(n, "", "%s %s holds %d bytes, more than %d", what, human.Quote(p), fi.Size(), limit)
		return nil, false
	}
	data := make([]byte, fi.Size())
	if _, err := readFull(file, data); err != nil {
		ps.errorf(n, "", "%s %s: %v", what, human.Quote(p), unwrapPath(err))
		return nil, false
	}
	ps.noteRead(filepath.Join(dir, rel))
	return data, true
}

// fileKind names what a file that is not a regular one is.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	}
	return "special file"
}

func readFull(f *os.File, data []byte) (int, error) {
	n := 0
	for n < len(data) {
		m, err := f.Read(data[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// absPath is a file the spec names (and readFile has checked), made
// absolute, so that backends find it from any working directory.
func (ps *paths) absPath(p string) string {
	dir, rel, err := ps.spec.files.locate(ps.spec.files.base, p)
	if err != nil {
		return p
	}
	return filepath.Join(dir, rel)
}

// noteRead remembers a file the spec reads, which no write may name.
func (ps *paths) noteRead(full string) {
	if ps.reads == nil {
		ps.reads = map[string]bool{}
	}
	ps.reads[filepath.Clean(full)] = true
}

// checkWrite checks a path the spec writes to (a save step's or an
// output's) where it is written: inside the save directory or an allowed
// tree, not written twice, not the spec itself nor a file it reads. The
// reads are all known once the buffers and kernels are read, and ops and
// outputs come after them.
func (ps *paths) checkWrite(n *node, what subject, p string) bool {
	dir, rel, err := ps.spec.files.locate(ps.saveDir(), p)
	if err != nil {
		hint := "save paths are relative to the save directory (the spec's, or --save-dir) and stay inside it; pass --allow-path DIR to allow another tree"
		ps.errorf(n, hint, "%s %s %v", what, human.Quote(p), err)
		return false
	}
	full := filepath.Join(dir, rel)
	switch {
	case ps.writes[full] != nil:
		ps.errorf(n, "write each file once", "%s %s is also written at %s", what, p, ps.pos(ps.writes[full]))
		return false
	case full == ps.specPath():
		ps.errorf(n, "save to another file", "%s %s is the spec itself", what, p)
		return false
	case ps.reads[full]:
		ps.errorf(n, "save to another file", "%s %s is a file the spec reads", what, p)
		return false
	}
	if ps.writes == nil {
		ps.writes = map[string]*node{}
	}
	ps.writes[full] = n
	return true
}

func (ps *paths) saveDir() string {
	if ps.spec.SaveDir != "" {
		return absDir(ps.spec.SaveDir)
	}
	return ps.spec.files.base
}

func (ps *paths) specPath() string {
	if ps.spec.File == "" || ps.spec.File == "-" {
		return ""
	}
	return absDir(ps.spec.File)
}

// WriteFile writes data to path, a save path written in the spec: inside
// the save directory (see SaveDir) or a tree AllowPath allows, through an
// os.Root so that no symbolic link takes it out. The data goes to a
// temporary file beside the target, renamed over it once complete, so a
// failure leaves the old file or none, never a torn one. Directories on
// the way are made.
func (s *Spec) WriteFile(path string, data []byte) error {
	dir, rel, err := s.files.locate(absDir(s.saveDir()), path)
	if err != nil {
		return fmt.Errorf("save %s: %v (%s)", human.Quote(path), err, "pass --allow-path DIR to allow another tree")
	}
	if save := absDir(s.saveDir()); dir == save {
		// The save directory is the person's choice: make it if need be.
		if err := os.MkdirAll(save, 0o755); err != nil {
			return fmt.Errorf("save %s: %w", human.Quote(path), err)
		}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("save %s: %w", human.Quote(path), err)
	}
	defer root.Close()
	if d := filepath.Dir(rel); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("save %s: %w", human.Quote(path), err)
		}
	}
	if fi, err := root.Lstat(rel); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("save %s: %s is a symbolic link; save to a file of its own", human.Quote(path), human.Quote(filepath.Join(dir, rel)))
	} else if err == nil && fi.IsDir() {
		return fmt.Errorf("save %s: %s is a directory", human.Quote(path), human.Quote(s.SavePath(path)))
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := filepath.Join(filepath.Dir(rel), "."+filepath.Base(rel)+".tmp-"+hex.EncodeToString(rnd[:]))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("save %s: %w", human.Quote(path), err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, rel)
	}
	if err != nil {
		root.Remove(tmp)
		return fmt.Errorf("save %s: %w", human.Quote(path), err)
	}
	return nil
}

// unwrapPath drops the path from an *os.PathError, which the message names
// already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
