package main

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// usageFlag finds the flags a command's usage documents, one a line.
var usageFlag = regexp.MustCompile(`(?m)^\t(--?[a-z][a-z0-9-]*)`)

// commandFlags lists the flags of each command, from its usage: the one
// place that documents them.
func commandFlags() map[string][]string {
	flags := map[string][]string{}
	for _, c := range commandList() {
		list := []string{"--help"}
		for _, m := range usageFlag.FindAllStringSubmatch(c.usage, -1) {
			if !slices.Contains(list, m[1]) {
				list = append(list, m[1])
			}
		}
		flags[c.name] = list
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

func writeBashCompletion(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# bash completion for dagrun: source <(dagrun completion bash)\n_dagrun() {\n")
	b.WriteString("\tlocal cur=${COMP_WORDS[COMP_CWORD]} flags=\n")
	fmt.Fprintf(&b, "\tif [ \"$COMP_CWORD\" -eq 1 ]; then\n\t\tCOMPREPLY=($(compgen -W %q -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(commandNames(), " "))
	b.WriteString("\tcase ${COMP_WORDS[1]} in\n")
	flags := commandFlags()
	for _, c := range commandList() {
		fmt.Fprintf(&b, "\t%s) flags=%q ;;\n", c.name, strings.Join(flags[c.name], " "))
	}
	fmt.Fprintf(&b, "\thelp) COMPREPLY=($(compgen -W %q -- \"$cur\")); return ;;\n", strings.Join(commandNames(), " "))
	b.WriteString("\tesac\n")
	b.WriteString("\tif [[ $cur == -* ]]; then\n\t\tCOMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n\telse\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n\tfi\n}\n")
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
		fmt.Fprintf(&b, "\t%s) flags=(%s) ;;\n", c.name, strings.Join(flags[c.name], " "))
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
		for _, f := range flags[c.name] {
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
