//go:build !unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/simba-go/simba"
)

// runTerm runs argv for the term t. Without Unix signals and process groups the command is
// killed when ctx ends (there is no SIGTERM to send), no supervisor watches simba itself, and
// there is no early stop.
func runTerm(ctx context.Context, t simba.Term, argv []string, grace, _ time.Duration, _ earlyStop) (int, bool, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = termEnv(t)
	cmd.WaitDelay = grace
	err := cmd.Run()
	var exit *exec.ExitError
	if err == nil || errors.As(err, &exit) {
		return cmd.ProcessState.ExitCode(), false, nil
	}
	return 0, false, err
}

// supervise exists only on Unix.
func supervise([]string) int {
	fmt.Fprintf(os.Stderr, "simba: %s needs a Unix system\n", supervisorCommand)
	return 2
}
