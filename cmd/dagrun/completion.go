package main

import (
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// usageFlag finds the flags a command's usage documents, one a line, with
// the placeholder of their value if they take one; usageShort the other
// spellings it names, such as --json.
var (
	usageFlag  = regexp.MustCompile(`(?m)^\t(--?[a-z][a-z0-9-]*)(?: ([A-Z][A-Z0-9]*))?`)
	usageShort = regexp.MustCompile(`\((--[a-z][a-z0-9-]*) is short for `)
)

// flagSet is what completion knows of one command's flags.
type flagSet struct {
	all    []string // every flag
	files  []string // the flags whose value is a file (placeholder FILE)
	dirs   []string // ... a directory (DIR)
	values []string // ... something else: no file names after them
}

// commandFlags lists the flags of each command, from its usage: the one
// place that documents them.
func commandFlags() map[string]flagSet {
	flags := map[string]flagSet{}
	for _, c := range commandList() {
		fs := flagSet{all: []string{"--help"}}
		add := func(list *[]string, f string) {
			if !slices.Contains(*list, f) {
				*list = append(*list, f)
			}
		}
		for _, m := range usageFlag.FindAllStringSubmatch(c.usage, -1) {
			add(&fs.all, m[1])
			switch m[2] {
			case "":
			case "FILE":
				add(&fs.files, m[1])
			case "DIR":
				add(&fs.dirs, m[1])
			default:
				add(&fs.values, m[1])
			}
		}
		for _, m := range usageShort.FindAllStringSubmatch(c.usage, -1) {
			add(&fs.all, m[1])
		}
		flags[c.name] = fs
	}
	return flags
}

func (c *cli) completion(args []string) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		return helpRequest{}
	}
	if len(args) != 1 {
		return usagef("completion takes one shell: bash, zsh or fish")
	}
	var write func(io.Writer) error
	switch args[0] {
	case "bash":
		write = writeBashCompletion
	case "zsh":
		write = writeZshCompletion
	case "fish":
		write = writeFishCompletion
	default:
		return usagef("completion: unknown shell %q: use bash, zsh or fish", args[0])
	}
	return write(c.stdout)
}

func commandNames() []string {
	names := make([]string, len(commandList()))
	for i, c := range commandList() {
		names[i] = c.name
	}
	return append(names, "help")
}

// writeBashCompletion writes the bash script. Its replies are read a line
// at a time (mapfile), never split into words or expanded as globs, so that
// file names with spaces or glob characters come back whole.
func writeBashCompletion(w io.Writer) error {
	var b strings.Builder
	reply := func(opts string) string {
		return "mapfile -t COMPREPLY < <(compgen " + opts + " -- \"$cur\")"
	}
	b.WriteString("# bash completion for dagrun: source <(dagrun completion bash)\n_dagrun() {\n")
	b.WriteString("\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} flags= dirs= values=\n\tCOMPREPLY=()\n")
	commands := fmt.Sprintf("-W %q", strings.Join(commandNames(), " "))
	fmt.Fprintf(&b, "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\t%s\n\t\treturn\n\tfi\n", reply(commands))
	b.WriteString("\tcase ${COMP_WORDS[1]} in\n")
	flags := commandFlags()
	for _, c := range commandList() {
		fs := flags[c.name]
		fmt.Fprintf(&b, "\t%s) flags=%q dirs=%q values=%q ;;\n", c.name,
			strings.Join(fs.all, " "), strings.Join(fs.dirs, " "), strings.Join(fs.values, " "))
	}
	fmt.Fprintf(&b, "\thelp) %s; return ;;\n", reply(commands))
	b.WriteString("\tesac\n")
	backends := append(slices.Clone(backendNames), slices.Sorted(maps.Keys(backendAliases))...)
	fmt.Fprintf(&b, "\tif [ \"$prev\" = --backend ]; then\n\t\t%s\n", reply(fmt.Sprintf("-W %q", strings.Join(backends, " "))))
	fmt.Fprintf(&b, "\telif [[ \" $dirs \" == *\" $prev \"* ]]; then\n\t\t%s\n", reply("-d"))
	b.WriteString("\telif [[ \" $values \" == *\" $prev \"* ]]; then\n\t\treturn\n")
	fmt.Fprintf(&b, "\telif [[ $cur == -* ]]; then\n\t\t%s\n", reply(`-W "$flags"`))
	fmt.Fprintf(&b, "\telse\n\t\t%s\n\tfi\n}\n", reply("-f"))
	b.WriteString("complete -o filenames -F _dagrun dagrun\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeZshCompletion(w io.Writer) error {
	var b strings.Builder
	b.WriteString("#compdef dagrun\n# zsh completion for dagrun: source <(dagrun completion zsh), after compinit\n_dagrun() {\n")
	fmt.Fprintf(&b, "\tif (( CURRENT == 2 )); then\n\t\tcompadd -- %s\n\t\treturn\n\tfi\n", strings.Join(commandNames(), " "))
	b.WriteString("\tlocal -a flags\n\tcase $words[2] in\n")
	flags := commandFlags()
	for _, c := range commandList() {
		fmt.Fprintf(&b, "\t%s) flags=(%s) ;;\n", c.name, strings.Join(flags[c.name].all, " "))
	}
	fmt.Fprintf(&b, "\thelp) compadd -- %s; return ;;\n", strings.Join(commandNames(), " "))
	b.WriteString("\tesac\n\tif [[ $PREFIX == -* ]]; then\n\t\tcompadd -- $flags\n\telse\n\t\t_files\n\tfi\n}\n")
	b.WriteString("compdef _dagrun dagrun\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeFishCompletion(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# fish completion for dagrun: dagrun completion fish > ~/.config/fish/completions/dagrun.fish\n")
	for _, c := range commandList() {
		summary := strings.TrimSpace(commandSummary(c.name))
		fmt.Fprintf(&b, "complete -c dagrun -n __fish_use_subcommand -f -a %s -d %s\n", c.name, fishQuote(summary))
	}
	b.WriteString("complete -c dagrun -n __fish_use_subcommand -f -a help -d 'show a command\\'s usage'\n")
	flags := commandFlags()
	for _, c := range commandList() {
		for _, f := range flags[c.name].all {
			opt := "-l " + strings.TrimPrefix(f, "--")
			if !strings.HasPrefix(f, "--") {
				opt = "-s " + strings.TrimPrefix(f, "-")
			}
			fmt.Fprintf(&b, "complete -c dagrun -n '__fish_seen_subcommand_from %s' %s\n", c.name, opt)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// commandSummary is the command's line in the main usage.
func commandSummary(name string) string {
	for _, line := range strings.Split(usage("dagrun"), "\n") {
		if rest, ok := strings.CutPrefix(line, "\t"+name+" "); ok {
			return rest
		}
	}
	return ""
}

func fishQuote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}
