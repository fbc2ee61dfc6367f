package main

import (
	"context"

	"github.com/simba-go/simba/open"
	"github.com/simba-go/simba/spi"
)

// openBackend opens the backend a DSN names (open.Open: every scheme the library knows, errors
// that name the problem and never show the password). It does no I/O unless opts ask for it.
// The caller closes it.
func openBackend(ctx context.Context, dsn string, opts ...open.Option) (spi.Backend, error) {
	return open.Open(ctx, dsn, opts...)
}
