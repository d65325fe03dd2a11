package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	goccy "github.com/goccy/go-yaml"
	goccyparser "github.com/goccy/go-yaml/parser"
	yaml "go.yaml.in/yaml/v3"
)

// Two YAML parsers, each for one job. go.yaml.in/yaml/v3 parses every
// spec: its nodes carry the line and column of each value, which every
// later message uses, and it is fast. It reports syntax errors with a line
// only, and unknown aliases only as text, so two regexps read its
// messages (unknownAnchorRE, yamlLineRE). goccy/go-yaml is asked only on
// that error path, for the column of a syntax error (syntaxError), and
// only for small inputs: it is far slower. TestYAMLParsers pins both the
// messages the regexps read and that goccy is used in this file alone.

var bom = []byte("\ufeff")

// document parses src and returns its one document's body, or nil having
// reported why there is none.
func document(r *reader, src []byte) *node {
	src = bytes.TrimPrefix(src, bom)
	var body *node
	for range maxUnknownAliases + 1 {
		var err error
		body, err = parseYAML(r, src)
		if err == nil {
			break
		}
		name, isAnchor := unknownAnchor(err)
		if !isAnchor {
			syntaxError(r, src, err)
			return nil
		}
		// Report the alias where it is written and parse again with a
		// null in its place, so that every other problem is found too.
		line, col, at := findAlias(src, name)
		if at < 0 {
			r.errorf(nil, "define the anchor with &"+name+" before using it", "alias *%s names no anchor", name)
			return nil
		}
		r.errs = append(r.errs, &Error{Pos: Position{File: r.file, Line: line, Col: col},
			Msg: "alias *" + name + " names no anchor", Hint: "define the anchor with &" + name + " before using it"})
		if r.unknownAliases == nil {
			r.unknownAliases = map[[2]int]bool{}
		}
		r.unknownAliases[[2]int{line, col}] = true
		src = bytes.Clone(src)
		src[at] = '~'
		for i := at + 1; i <= at+len(name); i++ {
			src[i] = ' '
		}
		body = nil
	}
	if body == nil {
		if len(r.errs) == 0 {
			r.errorf(nil, "declare buffers and ops", "the spec is empty")
		}
		return nil
	}
	if !checkDepth(r, body) {
		return nil
	}
	return body
}

// parseYAML parses src into its one document's body; a second document
// is an error of its own, reported here.
func parseYAML(r *reader, src []byte) (*node, error) {
	if !hasDocumentMarker(src) {
		// One document: parse from the bytes, without a reader's copies.
		var doc node
		if err := yaml.Unmarshal(src, &doc); err != nil {
			return nil, err
		}
		if len(doc.Content) != 1 || isNull(doc.Content[0]) {
			return nil, nil
		}
		return doc.Content[0], nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var second node
	switch err := dec.Decode(&second); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, err
	case len(second.Content) == 1 && !isNull(second.Content[0]):
		r.errorf(second.Content[0], "put the whole spec in one document", "a spec is one YAML document; this is a second one")
		return nil, nil
	}
	if len(doc.Content) != 1 || isNull(doc.Content[0]) {
		return nil, nil
	}
	return doc.Content[0], nil
}

// hasDocumentMarker reports whether a line of src starts with "---" or
// "...", which a second document needs.
func hasDocumentMarker(src []byte) bool {
	return bytes.HasPrefix(src, []byte("---")) || bytes.HasPrefix(src, []byte("...")) ||
		bytes.Contains(src, []byte("\n---")) || bytes.Contains(src, []byte("\n..."))
}

var unknownAnchorRE = regexp.MustCompile(`^yaml: unknown anchor '(.*)' referenced$`)

func unknownAnchor(err error) (string, bool) {
	m := unknownAnchorRE.FindStringSubmatch(err.Error())
	if m == nil {
		return "", false
	}
	return m[1], true
}

// findAlias finds the first "*name" in src that stands where an alias
// can: after a space, a flow indicator or the start of a line, and before
// the end of the name. It returns its line, column and offset; at is -1
// when there is none.
func findAlias(src []byte, name string) (line, col, at int) {
	tok := "*" + name
	from := 0
	for {
		i := bytes.Index(src[from:], []byte(tok))
		if i < 0 {
			return 0, 0, -1
		}
		i += from
		from = i + 1
		before := i == 0 || strings.IndexByte(" \t\n[{,:-", src[i-1]) >= 0
		end := i + len(tok)
		after := end == len(src) || strings.IndexByte(" \t\r\n]},", src[end]) >= 0
		if before && after {
			line = 1 + bytes.Count(src[:i], []byte("\n"))
			col = i - bytes.LastIndexByte(src[:i], '\n')
			return line, col, i
		}
	}
}

// goccyLimit bounds the specs goccy/go-yaml is asked about: it takes
// about a second per MiB.
const goccyLimit = 256 << 10

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError reports an error of the YAML parser. go.yaml.in/yaml/v3
// gives only a line; goccy/go-yaml, asked again on this error path only,
// gives the column too, for inputs small and shallow enough that asking is
// cheap (goccyLimit bytes, MaxDepth levels of flow nesting).
func syntaxError(r *reader, src []byte, err error) {
	e := &Error{Pos: Position{File: r.file, Line: 1, Col: 1}, Msg: "YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		e.Pos.Line, _ = strconv.Atoi(m[1])
		e.Msg = "YAML: " + m[2]
	}
	if len(src) <= goccyLimit && flowDepth(src) <= MaxDepth {
		if _, gerr := goccyparser.ParseBytes(src, 0); gerr != nil {
			var ye goccy.Error
			if errors.As(gerr, &ye) {
				if tk := ye.GetToken(); tk != nil && tk.Position != nil && tk.Position.Line > 0 {
					e.Pos.Line, e.Pos.Col = tk.Position.Line, max(tk.Position.Column, 1)
					e.Msg = "YAML: " + ye.GetMessage()
				}
			}
		}
	}
	if strings.Contains(e.Msg, "not allowed in this context") || strings.Contains(e.Msg, "did not find expected") {
		e.Hint = indentHint(src, e.Pos.Line)
	}
	if strings.Contains(e.Msg, "\t") {
		// A tab printed as it is looks like spaces: name it.
		e.Msg = strings.ReplaceAll(e.Msg, "character '\t'", "a tab ('\\t')")
		e.Msg = strings.ReplaceAll(e.Msg, "\t", `\t`)
		e.Hint = "YAML indents with spaces, never tabs: replace the tab with spaces"
	}
	r.errs = append(r.errs, e)
}

// indentHint explains a YAML error at line that is most often an
// indentation slip: a line indented more than the one above it although
// that one opens no block.
func indentHint(src []byte, line int) string {
	const general = "check the indentation: the keys of one mapping start in the same column, and only a key ending in ':' takes an indented block"
	lines := strings.Split(string(src), "\n")
	prev := -1 // the last non-blank, non-comment line before i
	for i := 0; i < len(lines) && i <= line; i++ {
		t := strings.TrimSpace(lines[i])
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
		if prev >= 0 && i >= line-1 {
			p := lines[prev]
			pt := strings.TrimSpace(p)
			if c := strings.Index(pt, " #"); c >= 0 {
				pt = strings.TrimSpace(pt[:c])
			}
			content := len(p) - len(strings.TrimLeft(p, " "))
			if strings.HasPrefix(pt, "- ") {
				content += 2
			}
			if indent > content && !strings.HasSuffix(pt, ":") {
				return fmt.Sprintf("line %d is indented more than line %d above it; %s", i+1, prev+1, general[len("check the indentation: "):])
			}
		}
		prev = i
	}
	return general
}

// flowDepth is an upper bound of the nesting of flow collections in src.
func flowDepth(src []byte) int {
	d, most := 0, 0
	for _, c := range src {
		switch c {
		case '[', '{':
			d++
			most = max(most, d)
		case ']', '}':
			d = max(d-1, 0)
		}
	}
	return most
}

// checkDepth refuses documents nested deeper than MaxDepth, at the first
// node too deep, before anything reads them. The parser refuses nesting
// beyond 10000 levels, so the recursion is bounded.
func checkDepth(r *reader, root *node) bool {
	if deep := tooDeep(root, 1); deep != nil {
		r.errorf(deep, "a spec needs a few levels; flatten the data", "the spec is nested more than %d levels deep", MaxDepth)
		return false
	}
	return true
}

// tooDeep returns the first node under n (at depth) deeper than MaxDepth.
// It looks at every node of the document, most of them scalars, so it
// looks at a node without content without a call.
func tooDeep(n *node, depth int) *node {
	if depth > MaxDepth {
		return n
	}
	for _, c := range n.Content {
		if len(c.Content) == 0 {
			if depth == MaxDepth {
				return c
			}
			continue
		}
		if deep := tooDeep(c, depth+1); deep != nil {
			return deep
		}
	}
	return nil
}
