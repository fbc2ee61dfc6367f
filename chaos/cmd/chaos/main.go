// Command chaos is Simba's fault-injection harness on real servers and real processes.
//
//	chaos run -backend postgres -rounds 20 -seed 42     run worker processes on a private server
//	                                                    through fault proxies, inject faults,
//	                                                    then check the history
//	chaos worker ...                                    one worker (started by run)
//	chaos check -history FILE -ttl 1s                   the checkers again, over a kept history
//	chaos table -results FILE                           the Markdown table of docs/reliability.md
//
// run prints its seed and the command that replays it; the schedule of faults (which, on whom,
// for how long) follows from the seed. See docs/reliability.md.
//
// The harness needs a Unix system: it kills process groups, pauses processes with SIGSTOP and
// runs servers as their own users. make vet vets it for Linux, macOS and FreeBSD, not Windows;
// only on Linux do its servers and workers die with it (a parent-death signal).
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: chaos run|worker|check|table [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runChaos(os.Args[2:])
	case "worker":
		err = runWorker(os.Args[2:])
	case "check":
		err = runCheck(os.Args[2:])
	case "table":
		err = runTable(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}
