package fencehttp_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fencehttp"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// The server refuses a request whose token is lower than the highest it has seen for the
// request's path; the client's transport sends the token of the request's context.
func Example() {
	guard := &fencehttp.Guard{} // resource = URL path
	srv := httptest.NewServer(guard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, _ := fencehttp.Token(r.Context()) // pass it on to fencesql / fenceredis
		fmt.Println("stored with token", token)
	})))
	defer srv.Close()

	client := &http.Client{Transport: &fencehttp.Transport{}}
	put := func(token int64) error {
		// token is term.Token() of the holder (simba.Term).
		ctx := fencehttp.WithToken(context.Background(), token)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/invoices/42", strings.NewReader("paid"))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	fmt.Println(put(7))
	err := put(6)
	var stale *fence.StaleTokenError
	fmt.Println(errors.Is(err, fence.ErrStaleToken), errors.As(err, &stale) && stale.Highest == 7)
	// Output:
	// stored with token 7
	// <nil>
	// true true
}

// With Verify, the guard asks the lock service about every token that would raise a
// resource's highest (once per tenure): a token the lease never granted, such as the int64
// maximum a buggy client sent, gets 403 and changes nothing, so it cannot lock the real
// holders out. MaxResources bounds the guard's memory: a new resource beyond it gets 503.
func ExampleGuard_verify() {
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock())) // or open.Open(ctx, dsn)
	ctx := context.Background()
	c, err := simba.New(srv.Backend())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close(ctx)
	held, err := c.Lock(ctx, "invoices") // one lease guards the whole collection
	if err != nil {
		log.Fatal(err)
	}

	guard := &fencehttp.Guard{
		Resource:     func(*http.Request) string { return "invoices" },
		Verify:       fence.LeaseVerifier(srv.Backend(), nil), // resource name = lease name
		MaxResources: 1000,
	}
	web := httptest.NewServer(guard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})))
	defer web.Close()

	client := &http.Client{Transport: &fencehttp.Transport{}}
	put := func(token int64) error {
		req, _ := http.NewRequestWithContext(fencehttp.WithToken(ctx, token), http.MethodPut, web.URL+"/invoices/42", strings.NewReader("paid"))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	err = put(math.MaxInt64) // 403 Forbidden, read back by the Transport
	var refused *fence.UnverifiedTokenError
	fmt.Println(errors.Is(err, fence.ErrUnverifiedToken), errors.As(err, &refused) && refused.Resource == "invoices")
	fmt.Println(put(held.Token()))
	// Output:
	// true true
	// <nil>
}
