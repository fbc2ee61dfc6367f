package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/simba-go/simba/spi"

	"github.com/simba-go/simba"
	redisbackend "github.com/simba-go/simba/backend/redis"
	sqlbackend "github.com/simba-go/simba/backend/sql"
	"github.com/simba-go/simba/backend/zookeeper"

	dsnutil "github.com/simba-go/simba/internal/dsn"
)

// openBackend opens the backend a DSN names. The caller closes it.
func openBackend(ctx context.Context, dsn string) (spi.Backend, error) {
	scheme, _, ok := strings.Cut(dsn, "://")
	if !ok || !dsnutil.ValidScheme(scheme) {
		return nil, dsnutil.Errorf(simba.ErrInvalidOption, "DSN", dsn, "no scheme (sqlite://, postgres://, mysql://, redis://, zk://)")
	}
	switch strings.ToLower(scheme) {
	case "sqlite", "postgres", "postgresql", "mysql":
		return sqlbackend.Open(ctx, dsn)
	case "redis", "rediss", "redis+cluster", "rediss+cluster":
		return redisbackend.Open(dsn)
	case "zk", "zk+tls":
		return zookeeper.New(dsn)
	}
	return nil, fmt.Errorf("%w: unknown DSN scheme %q", simba.ErrInvalidOption, scheme)
}
