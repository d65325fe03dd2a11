package main

import (
	"os"
	"path/filepath"

	"github.com/dagrun/dagrun/spec"
)

// fileUse is a file a command reads or writes, and what names it there
// ("-o", "--trace", "the spec", "a save path of the spec"...).
type fileUse struct {
	path, role string
}

// specUses adds to reads and writes the files spec s reads and writes and
// the spec file itself.
func specUses(s *spec.Spec, reads, writes []fileUse) ([]fileUse, []fileUse) {
	if s.File != "" && s.File != stdio {
		reads = append(reads, fileUse{s.File, "the spec"})
	}
	r, w := s.Files()
	for _, p := range r {
		reads = append(reads, fileUse{p, "a file the spec reads"})
	}
	for _, p := range w {
		writes = append(writes, fileUse{p, "a save path of the spec"})
	}
	return reads, writes
}

// checkFileUses refuses, before anything is written, a command that
// would write one file twice or overwrite one of its inputs, as the
// spec's own saves are checked. A file both read and written under one
// role (--perf-model: read, updated, saved) is fine. Standard output and
// files that are not regular (/dev/null, a FIFO) are left alone: writing
// to them destroys nothing.
func checkFileUses(reads, writes []fileUse) error {
	for i, w := range writes {
		if !checkable(w.path) {
			continue
		}
		for _, o := range writes[:i] {
			if checkable(o.path) && sameFile(w.path, o.path) {
				return usagef("%s %s is also written as %s: write each file once", w.role, w.path, o.role)
			}
		}
	}
	for _, w := range writes {
		if !checkable(w.path) {
			continue
		}
		for _, r := range reads {
			if r.role != w.role && sameFile(w.path, r.path) {
				return usagef("%s %s would overwrite %s: write to another file", w.role, w.path, r.role)
			}
		}
	}
	return nil
}

func checkable(path string) bool {
	if path == "" || path == stdio {
		return false
	}
	fi, err := os.Stat(path)
	return err != nil || fi.Mode().IsRegular()
}

// sameFile reports whether a and b name one file: the same path, or the
// same file reached by links.
func sameFile(a, b string) bool {
	if a == "" || a == stdio || b == "" || b == stdio {
		return false
	}
	if abs(a) == abs(b) {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// fileUses lists what a run of s reads and writes: the spec's own files,
// -o, --trace and --perf-model (read and updated). The spec's saves come
// first, so that an error names the flag that collides with them.
func (f *runFlags) fileUses(s *spec.Spec, out, traceFile, perfModel string) (reads, writes []fileUse) {
	reads, writes = specUses(s, nil, nil)
	writes = append(writes, fileUse{out, "-o"}, fileUse{traceFile, "--trace"}, fileUse{perfModel, "--perf-model"})
	reads = append(reads, fileUse{perfModel, "--perf-model"})
	return reads, writes
}
