package fencehttp_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/simba-go/simba/fence"
	"github.com/simba-go/simba/fence/fencehttp"
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
