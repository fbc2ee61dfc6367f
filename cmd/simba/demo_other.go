//go:build !unix

package main

import (
	"context"
	"errors"
	"fmt"
)

// demo fails outside Unix with an error that wraps errors.ErrUnsupported (exit status 1).
func demo(context.Context, []string) error {
	return fmt.Errorf("the demo sends SIGKILL and SIGSTOP to its workers: it needs a Unix system (%w)", errors.ErrUnsupported)
}

func demoWorker(context.Context, []string) error { return demo(context.Background(), nil) }
