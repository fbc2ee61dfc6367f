// Package bad is a tiny stand-in for sqlc output with int32 where int64 is required.
package bad

import "context"

type AcquireRow struct {
	Granted     bool
	Token       int64
	RemainingMs int32
	HolderID    string
}

type OpenSessionParams struct {
	ID    string
	TtlMs interface{}
}

func SessionRemaining(ctx context.Context, id string) (int64, error) {
	var remaining_ms int32
	return int64(remaining_ms), nil
}

func Release(ctx context.Context, name string, token int) error { return nil }
