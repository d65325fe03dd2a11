package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// versionInfo is what dagrun version prints, as JSON with --format json.
type versionInfo struct {
	SchemaVersion int    `json:"schema_version"`
	Version       string `json:"version"`
	Revision      string `json:"revision"`
	Time          string `json:"time,omitempty"`
	Dirty         bool   `json:"dirty,omitempty"`
	Go            string `json:"go"`
	Platform      string `json:"platform"`
}

// buildVersion reads the version from the binary's build information.
func buildVersion() versionInfo {
	v := versionInfo{SchemaVersion: schemaVersion, Version: "(devel)", Revision: "unknown",
		Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Dirty = s.Value == "true"
		}
	}
	return v
}

func (c *cli) version(args []string) error {
	asJSON, out, err := c.noArgFlags("version", args)
	if err != nil {
		return err
	}
	v := buildVersion()
	return c.writeOutput(out, func(w io.Writer) error {
		if asJSON {
			return writeJSON(w, v)
		}
		rev := v.Revision
		if v.Dirty {
			rev += "+dirty"
		}
		_, err := fmt.Fprintf(w, "dagrun %s (revision %s) %s %s\n", v.Version, rev, v.Go, v.Platform)
		return err
	})
}
