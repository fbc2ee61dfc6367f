// Package raise holds what fencesql and fenceredis share about verifying tokens: a token is
// put to the fence.Verifier only when it would raise the resource's stored highest token.
package raise

import (
	"context"

	"github.com/simba-go/simba/fence"
)

// Check asks v about token unless the stored highest token of resource (read with highest) is
// at least token; nil v trusts every token. Reading the highest apart from the write that
// follows is sound: the stored highest only grows, so a token at most the one read can raise
// nothing, whatever is written meanwhile.
func Check(ctx context.Context, v fence.Verifier, highest func(context.Context, string) (int64, bool, error), resource string, token int64) error {
	if v == nil {
		return nil
	}
	h, seen, err := highest(ctx, resource)
	if err != nil {
		return err
	}
	if seen && token <= h {
		return nil
	}
	return v(ctx, resource, token)
}
