// Package good is a tiny stand-in for sqlc output where every token and ms value is int64.
package good

import (
	"context"
	"database/sql"
)

type AcquireRow struct {
	Granted     bool
	Token       int64
	RemainingMs int64
	ExpiryMs    sql.NullInt64
	Items       int32
	Members     []string
}

func SessionRemaining(ctx context.Context, id string) (int64, error) {
	var remaining_ms int64
	return remaining_ms, nil
}
