package main

// This file is the one place where the command line meets the spec
// loader's file options.

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/dagrun/dagrun/spec"
)

// stdinName is how positions in a spec read from standard input name it.
const stdinName = "<stdin>"

// maxStdinSpec bounds what is read from standard input before the spec
// loader sees it, so that an endless stream cannot exhaust memory. The
// loader's own size limit (spec/doc.go) is the rule; this only stops the
// read.
const maxStdinSpec = spec.MaxSpecBytes

// specFiles are the file options of the command line for the spec loader.
type specFiles struct {
	allow   []string      // --allow-path: directories a spec may read and write beyond its own tree
	saveDir string        // --save-dir: where relative save paths go
	baseDir string        // where relative paths resolve for a spec from standard input
	set     paramValues   // --set name=value: the spec's parameters
	lists   []paramList   // --set name=v1,v2,...: the shapes dagrun run runs in turn
	shapes  bool          // the command takes lists (dagrun run)
	extra   []spec.Option // more options: a rank's (ranks.go)
}

// addFlags registers --allow-path and --save-dir: every command that
// loads a spec takes them, so that validate and plan check the paths run
// will use.
func (o *specFiles) addFlags(fs *flag.FlagSet) {
	fs.Var((*multiFlag)(&o.allow), "allow-path", "")
	fs.StringVar(&o.saveDir, "save-dir", "", "")
	fs.Var(&paramFlag{o}, "set", "")
}

// paramValues are --set's parameters, in the order given; a later one
// for a name wins.
type paramValues []spec.Option

// paramList is a --set of several values.
type paramList struct {
	name   string
	values []int64
}

// paramFlag is --set: one value is an option of the load; several are a
// list of shapes, loaded at the first.
type paramFlag struct{ o *specFiles }

func (p *paramFlag) String() string { return "" }

func (p *paramFlag) Set(s string) error {
	name, values, err := spec.ParseParamValues(s)
	if err != nil {
		return err
	}
	p.o.lists = slices.DeleteFunc(p.o.lists, func(l paramList) bool { return l.name == name })
	if len(values) > 1 {
		p.o.lists = append(p.o.lists, paramList{name, values})
	}
	p.o.set = append(p.o.set, spec.WithParam(name, values[0]))
	return nil
}

// loaderOptions are o as the spec loader's options.
func loaderOptions(o specFiles) []spec.Option {
	opts := []spec.Option{spec.WithSaveDir(o.saveDir)}
	for _, dir := range o.allow {
		opts = append(opts, spec.AllowPath(dir))
	}
	if o.baseDir != "" {
		opts = append(opts, spec.WithBaseDir(o.baseDir))
	}
	opts = append(opts, o.set...)
	return append(opts, o.extra...)
}

// loadSpecFile loads the spec file at path with the file options o.
func loadSpecFile(path string, o specFiles) (*spec.Spec, error) {
	return spec.Load(path, loaderOptions(o)...)
}

// stdinSpec reads standard input once, up to the spec loader's limit: a
// spec read from it is loaded again for each rank, and viz looks at it
// first to tell a trace from a spec.
func (c *cli) stdinSpec() ([]byte, error) {
	if c.stdinData == nil {
		data, err := io.ReadAll(io.LimitReader(c.stdin, maxStdinSpec+1))
		if err != nil {
			return nil, fmt.Errorf("reading the spec from standard input: %w", err)
		}
		c.stdinData = data
	}
	return c.stdinData, nil
}

// load reads the spec at path ("-": standard input) with the file
// options o. A spec with errors comes back as a *failure listing every
// problem, warnings too. The warnings of a spec that loads are the
// caller's to print (printWarnings) or to put in its JSON document.
func (c *cli) load(path string, o specFiles) (*spec.Spec, error) {
	if len(o.lists) > 0 && !o.shapes {
		return nil, usagef("--set %s: several values run each shape in turn, which only dagrun run does; give one value", o.lists[0].name)
	}
	var s *spec.Spec
	var err error
	if path == stdio {
		data, rerr := c.stdinSpec()
		if rerr != nil {
			return nil, rerr
		}
		if len(data) > maxStdinSpec {
			return nil, fmt.Errorf("the spec on standard input is more than %d bytes", maxStdinSpec)
		}
		wd, werr := os.Getwd()
		if werr != nil {
			return nil, werr
		}
		o.baseDir = wd
		s, err = spec.Parse(stdinName, data, loaderOptions(o)...)
	} else {
		s, err = loadSpecFile(path, o)
	}
	if err == nil {
		return s, nil
	}
	errs := spec.Errors(err)
	if len(errs) == 0 {
		return nil, err
	}
	return nil, specFailure(s, errs)
}

// printWarnings prints the warnings of s on stderr, in file order.
func (c *cli) printWarnings(s *spec.Spec) {
	for _, w := range s.WarningProblems() {
		w.Message = "warning: " + w.Message
		fmt.Fprintln(c.stderr, w.Text(""))
	}
}
