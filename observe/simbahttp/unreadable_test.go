package simbahttp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/simba-go/simba/observe/simbahttp"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// TestUnreadableLeaseIsNotFree: a lease record the backend could not read (spi.LeaseInfo's
// Unreadable: a forged Redis hash whose token is not a decimal, which no acquire can take) is
// listed in /status's backend leases without ?free=1, not counted free, with remaining_ms -1
// and its reason; the holders list and the page show it as "unreadable record: <why>", escaped.
// Before Unreadable was carried, such a record with no holder field was counted free and left
// out of both lists, so the page said no lease was held: this test failed on that code.
func TestUnreadableLeaseIsNotFree(t *testing.T) {
	insp := &scriptedInspector{Backend: simbatest.NewServer().Backend()}
	why := "token \"abc\" is not a plain decimal integer\u202e"
	insp.set(nil, &spi.Snapshot{Leases: []spi.LeaseInfo{
		{Name: "forged", Unreadable: why, RemainingUnknown: true},
		{Name: "free", Token: 4},
	}}, nil)
	h := simbahttp.New(simbahttp.Opts{Backend: insp})
	hs := httptest.NewServer(h)
	defer hs.Close()
	st := status(t, hs.URL)
	if st.Backend == nil || len(st.Backend.Leases) != 1 || st.FreeLeases != 1 {
		t.Fatalf("/status backend %+v, free %d; want the unreadable lease listed and one free", st.Backend, st.FreeLeases)
	}
	if l := st.Backend.Leases[0]; l.Name != "forged" || l.Unreadable != why || l.RemainingMillis != -1 {
		t.Errorf("/status backend lease %+v", l)
	}
	if len(st.Holders) != 1 || st.Holders[0].Name != "forged" || st.Holders[0].Unreadable != why {
		t.Errorf("/status holders %+v, want the unreadable lease", st.Holders)
	}
	code, page := get(t, hs.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("page: %d", code)
	}
	if !strings.Contains(page, `unreadable record: token &#34;abc&#34; is not a plain decimal integer\u202e`) {
		t.Errorf("the page does not show the unreadable record escaped:\n%s", page)
	}
}
