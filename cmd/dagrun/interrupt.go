package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// interrupts installs dagrun's handler of SIGINT and SIGTERM. run calls it
// first thing, so that no signal meets Go's default handling (which ends
// the process by the signal: status 143 for SIGTERM) while a spec is read
// or planned. The first signal cancels the context: the command stops its
// work, frees what it holds and exits with 130. A second one exits at
// once with 130, whatever is still running. release undoes it all.
func interrupts(stderr io.Writer, exit func(int)) (ctx context.Context, release func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-done:
			return
		}
		select {
		case <-sigs:
			fmt.Fprintln(stderr, "dagrun: interrupted again: exiting now, without freeing what the run holds")
			exit(exitInterrupted)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}
