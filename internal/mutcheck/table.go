package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Mutant is one planted bug: in File, the one occurrence of From becomes
// To, and the tests Run selects in Pkgs must then fail.
type Mutant struct {
	Name string
	Why  string // what the planted bug lets through, for people
	File string // relative to the module root
	From string
	To   string
	Pkgs []string
	Run  string // a go test -run pattern; "" runs every test of Pkgs
	Line int    // of the mutant's name in the table, for errors
}

// TableError is a table that does not parse or a mutant whose snippet no
// longer matches its file, with the table's line.
type TableError struct {
	Table string
	Line  int
	Msg   string
}

func (e *TableError) Error() string { return fmt.Sprintf("%s:%d: %s", e.Table, e.Line, e.Msg) }

// parseTable reads the table: blocks of "key value" lines separated by
// blank lines, "#" lines being comments (those just before a block say
// why the mutant matters). Keys: name, file, from, to, pkgs (space
// separated), run. Values are taken as written after the key and its
// spaces, so from and to may hold any Go except a leading space.
func parseTable(name string, r io.Reader) ([]Mutant, error) {
	var out []Mutant
	var cur *Mutant
	var why []string
	finish := func(line int) error {
		if cur == nil {
			return nil
		}
		m := cur
		cur = nil
		switch {
		case m.Name == "":
			return &TableError{name, m.Line, "a mutant without a name"}
		case m.File == "" || m.From == "" || len(m.Pkgs) == 0:
			return &TableError{name, m.Line, fmt.Sprintf("mutant %s needs file, from and pkgs", m.Name)}
		case m.From == m.To:
			return &TableError{name, m.Line, fmt.Sprintf("mutant %s changes nothing", m.Name)}
		}
		for _, o := range out {
			if o.Name == m.Name {
				return &TableError{name, m.Line, fmt.Sprintf("mutant %s is named twice (also on line %d)", m.Name, o.Line)}
			}
		}
		out = append(out, *m)
		return nil
	}
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		switch {
		case trimmed == "":
			if err := finish(line); err != nil {
				return nil, err
			}
			why = nil
			continue
		case strings.HasPrefix(trimmed, "#"):
			why = append(why, strings.TrimSpace(strings.TrimPrefix(trimmed, "#")))
			continue
		}
		key, value, _ := strings.Cut(trimmed, " ")
		value = strings.TrimLeft(value, " \t")
		if cur == nil {
			cur = &Mutant{Line: line, Why: strings.Join(why, " ")}
		}
		switch key {
		case "name":
			if cur.Name != "" {
				return nil, &TableError{name, line, fmt.Sprintf("mutant %s starts inside mutant %s: put a blank line between them", value, cur.Name)}
			}
			cur.Name = value
		case "file":
			cur.File = value
		case "from":
			cur.From = value
		case "to":
			cur.To = value
		case "pkgs":
			cur.Pkgs = strings.Fields(value)
		case "run":
			cur.Run = value
		default:
			return nil, &TableError{name, line, fmt.Sprintf("unknown key %q (want name, file, from, to, pkgs or run)", key)}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := finish(line); err != nil {
		return nil, err
	}
	return out, nil
}

// apply returns the file's source with the mutant planted, or an error
// that says the snippet is gone or ambiguous: the table must follow the
// code, so a refactor that moves or rewrites a snippet fails the check
// until the table is updated.
func apply(root, table string, m Mutant) ([]byte, error) {
	src, err := os.ReadFile(filepath.Join(root, m.File))
	if err != nil {
		return nil, &TableError{table, m.Line, fmt.Sprintf("mutant %s: %v (was the file moved or renamed? other work may have refactored it: find where the code went and update this table)", m.Name, err)}
	}
	switch n := strings.Count(string(src), m.From); n {
	case 1:
	case 0:
		return nil, &TableError{table, m.Line, fmt.Sprintf("mutant %s: the snippet %q is no longer in %s: the code was changed or moved (a refactor or a merge may have done it); find where it went and update the mutant's file, from and to in this table, keeping a bug the tests must catch", m.Name, m.From, m.File)}
	default:
		return nil, &TableError{table, m.Line, fmt.Sprintf("mutant %s: the snippet %q occurs %d times in %s; make it longer so that it names one place", m.Name, m.From, n, m.File)}
	}
	return []byte(strings.Replace(string(src), m.From, m.To, 1)), nil
}
