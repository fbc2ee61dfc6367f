package fence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"strings"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// LeaseVerifier admits only the token of the lease's current tenure, as the backend reports
// it: a made-up token, one of another lease, or one of an ended tenure is refused with a
// *fence.UnverifiedTokenError. The backend here is the in-memory simbatest one; a server
// passes the backend open.Open (or simbasql.Open, redis.Open, ...) returned, which needs no
// session of its own.
func ExampleLeaseVerifier() {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock())) // or open.Open(ctx, dsn)
	ctx := context.Background()
	c, err := simba.New(srv.Backend())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	held, err := c.Lock(ctx, "invoice-42")
	if err != nil {
		log.Fatal(err)
	}

	// Resource "invoices/42" is fenced with the tokens of lease "invoice-42".
	verify := fence.LeaseVerifier(srv.Backend(), func(resource string) string {
		return strings.ReplaceAll(resource, "invoices/", "invoice-")
	})
	fmt.Println(verify(ctx, "invoices/42", held.Token()))
	err = verify(ctx, "invoices/42", math.MaxInt64)
	var refused *fence.UnverifiedTokenError
	fmt.Println(errors.Is(err, fence.ErrUnverifiedToken), errors.As(err, &refused) && refused.Current == held.Token())

	_ = held.Unlock(ctx)
	err = verify(ctx, "invoices/42", held.Token()) // its tenure has ended
	fmt.Println(err)
	// Output:
	// <nil>
	// true true
	// fence: token not granted by the lease: resource "invoices/42" refused token 1: lease "invoice-42" has no holder
}
