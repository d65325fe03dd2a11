package spec

import (
	"strconv"
	"strings"
)

// subject names what a value is read for, in messages: "run.streams",
// "ops[3] copy from", `op "up" argument x`. It is passed down by value and
// written out only when a message is made: a load reads a few values for
// each of up to millions of ops and reports a handful of problems, and
// building every name as a string up front was a good part of its time.
type subject struct {
	head  string // the name's start; for an op named by the spec, its name
	op    opRef  // how the name starts: head, ops[index] or op "head"
	index int32  // the op's index in the ops list, for opByIndex
	n     uint8  // words in use
	words [4]string
}

type opRef uint8

const (
	plain     opRef = iota // head is the start
	opByIndex              // ops[index]
	opByName               // op "head"
)

// about is a subject that starts with s.
func about(s string) subject { return subject{head: s} }

// opSubject is the op at index i of the ops list: ops[i].
func opSubject(i int) subject { return subject{op: opByIndex, index: int32(i)} }

// namedOpSubject is the op the spec calls name: op "name".
func namedOpSubject(name string) subject { return subject{op: opByName, head: name} }

// and is s followed by a space and word.
func (s subject) and(word string) subject {
	if int(s.n) == len(s.words) {
		s = subject{head: s.String()}
	}
	s.words[s.n] = word
	s.n++
	return s
}

func (s subject) String() string {
	var b strings.Builder
	switch s.op {
	case opByIndex:
		b.WriteString(opIndex(int(s.index)))
	case opByName:
		b.WriteString("op ")
		b.WriteString(strconv.Quote(s.head))
	default:
		b.WriteString(s.head)
	}
	for _, w := range s.words[:s.n] {
		b.WriteByte(' ')
		b.WriteString(w)
	}
	return b.String()
}
