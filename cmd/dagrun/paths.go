package main

import "github.com/dagrun/dagrun/spec"

// fileUse is a file a command reads or writes, and what names it there.
type fileUse = spec.FileUse

// checkFileUses refuses, as a usage error, a command that would write one
// file twice or overwrite one of its inputs (spec.CheckFileUses).
func checkFileUses(reads, writes []fileUse) error {
	if err := spec.CheckFileUses(reads, writes); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// outputUses are the files a command that writes -o out beside spec s
// reads and writes: -o comes first.
func outputUses(s *spec.Spec, out string) (reads, writes []fileUse) {
	reads, writes = s.FileUses()
	return reads, append([]fileUse{{Path: out, Role: "-o"}}, writes...)
}

// fileUses lists what a run of s reads and writes: the spec's own files,
// -o, --trace and --perf-model (read and updated). The spec's saves come
// first, so that an error names the flag that collides with them.
func (f *runFlags) fileUses(s *spec.Spec, out, traceFile, perfModel string) (reads, writes []fileUse) {
	reads, writes = s.FileUses()
	writes = append(writes, fileUse{Path: out, Role: "-o"}, fileUse{Path: traceFile, Role: "--trace"}, fileUse{Path: perfModel, Role: "--perf-model"})
	return append(reads, fileUse{Path: perfModel, Role: "--perf-model"}), writes
}
