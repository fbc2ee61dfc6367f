//go:build !unix

package main

import (
	"context"
	"errors"
)

func demo(context.Context, []string) error {
	return errors.New("the demo sends SIGKILL and SIGSTOP to its workers: it needs a Unix system")
}

func demoWorker(context.Context, []string) error { return demo(context.Background(), nil) }
