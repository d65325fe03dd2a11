package main

import "embed"

// The commands' usage texts are text, kept as text: one file each in
// help, named after its command (dagrun.txt is the command's own).
//
//go:embed help/*.txt
var helpFiles embed.FS

// usage is the usage text of command name ("dagrun" for dagrun itself).
func usage(name string) string {
	text, err := helpFiles.ReadFile("help/" + name + ".txt")
	if err != nil {
		panic("dagrun: no usage text for " + name) // the build embedded every one
	}
	return string(text)
}
