//go:build !unix

package main

import (
	"errors"
	"fmt"
	"os"
)

// errNoPause is the stale measure's error where there is no SIGSTOP to pause its holder with:
// each of its rows reports it.
var errNoPause = fmt.Errorf("the stale measure pauses its holder with SIGSTOP, which needs a Unix system: %w", errors.ErrUnsupported)

// pauseProcess fails with errNoPause.
func pauseProcess(*os.Process) error { return errNoPause }

// resumeProcess fails with errNoPause.
func resumeProcess(*os.Process) error { return errNoPause }
