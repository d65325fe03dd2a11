package spec

import (
	"fmt"
	"os"
)

// FileUse is a file a program reads or writes beside a spec, and what
// names it there ("-o", "--trace", "the spec", "a save path of the
// spec"...), for CheckFileUses' messages.
type FileUse struct {
	Path, Role string
}

// FileUses are what s reads and writes as FileUses: the spec file itself
// (unless it came from standard input, "-"), the files it reads and its
// save paths.
func (s *Spec) FileUses() (reads, writes []FileUse) {
	if s.File != "" && s.File != "-" {
		reads = append(reads, FileUse{s.File, "the spec"})
	}
	for _, p := range s.reads {
		reads = append(reads, FileUse{p, "a file the spec reads"})
	}
	for _, p := range s.writes {
		writes = append(writes, FileUse{p, "a save path of the spec"})
	}
	return reads, writes
}

// CheckFileUses refuses, before anything is written, writes that would
// hit one file twice or overwrite a file read: what a program keeps for
// its own outputs beside a spec, as the loader keeps for the spec's saves.
// A file both read and written under one role (a perf model: read, updated,
// saved) is fine. Standard output ("" or "-") and files that are not
// regular (/dev/null, a FIFO) are left alone: writing to them destroys
// nothing.
func CheckFileUses(reads, writes []FileUse) error {
	for i, w := range writes {
		if !checkable(w.Path) {
			continue
		}
		for _, o := range writes[:i] {
			if checkable(o.Path) && sameFile(w.Path, o.Path) {
				return fmt.Errorf("%s %s is also written as %s: write each file once", w.Role, w.Path, o.Role)
			}
		}
	}
	for _, w := range writes {
		if !checkable(w.Path) {
			continue
		}
		for _, r := range reads {
			if r.Role != w.Role && sameFile(w.Path, r.Path) {
				return fmt.Errorf("%s %s would overwrite %s: write to another file", w.Role, w.Path, r.Role)
			}
		}
	}
	return nil
}

func checkable(path string) bool {
	if path == "" || path == "-" {
		return false
	}
	fi, err := os.Stat(path)
	return err != nil || fi.Mode().IsRegular()
}

// sameFile reports whether a and b name one file: the same path, or the
// same file reached by links.
func sameFile(a, b string) bool {
	if a == "" || a == "-" || b == "" || b == "-" {
		return false
	}
	if absDir(a) == absDir(b) {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}
