//go:build !unix

package spec

import "errors"

func mkfifo(string) error { return errors.New("no FIFOs") }
