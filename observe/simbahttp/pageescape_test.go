package simbahttp_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/observe/simbahttp"
	"github.com/simba-go/simba/simbatest"
	"github.com/simba-go/simba/spi"
)

// The page shows owners, names and session ids as text: a character that reorders or hides
// the text around it (a bidirectional override, which wire.ValidateOwner refuses in an owner
// now but a forged record or a node of an older release can still hold) or a terminal escape
// in a forged record is shown as its Go escape, as simba status shows it. html/template
// escapes markup only: the page carried U+202E and ESC as they were, and an owner
// "node-b\u202eevil" read as "node-blive". The client's own owner can no longer carry one
// (WithOwner refuses it), so its markup alone is checked.
func TestPageShowsControlAndFormatCharactersEscaped(t *testing.T) {
	ctx := context.Background()
	srv := simbatest.NewServer(simbatest.WithClock(spi.SystemClock()))
	insp := &scriptedInspector{Backend: srv.Backend()}
	insp.set(nil, &spi.Snapshot{
		Leases: []spi.LeaseInfo{
			{Name: "forged\u2066name", Holder: "s\u202e1", Owner: "node-b\u202eevil", Token: 8, Remaining: 1500 * time.Millisecond},
		},
		Sessions: []spi.SessionInfo{
			{ID: "s\u202e1", Owner: "node-b\u202eevil", Remaining: 2500 * time.Millisecond},
			{ID: "s2", Owner: "\x1b[31mred\u200b", Remaining: 2500 * time.Millisecond},
		},
		Groups: map[string][]spi.SessionID{"shards": {"s2"}},
	}, nil)
	h := simbahttp.New(simbahttp.Opts{Backend: insp})
	c, err := simba.New(insp, append(h.Options(), simba.WithOwner("node-a<script>"), simba.WithTTL(3*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	h.Attach(c)
	held, err := c.Lock(ctx, "mine")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	hs := httptest.NewServer(h)
	defer hs.Close()
	code, page := get(t, hs.URL+"/")
	if code != http.StatusOK {
		t.Fatalf("page: %d", code)
	}
	for _, bad := range []string{"\u202e", "\u2066", "\u200b", "\x1b"} {
		if i := strings.Index(page, bad); i >= 0 {
			t.Errorf("the page carries %+q as is: …%s…", bad, page[max(0, i-60):min(len(page), i+60)])
		}
	}
	for _, want := range []string{
		`node-a&lt;script&gt;`, // the client's own owner (title, header)
		`node-b\u202eevil`,     // a forged record's owner
		`forged\u2066name`,     // a forged lease name
		`s\u202e1`,             // a forged session id
		`\x1b[31mred\u200b`,    // a terminal escape and a zero-width space
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	// The JSON keeps the strings as they are: a tool gets what the backend holds.
	st := status(t, hs.URL)
	if st.Session.Owner != "node-a<script>" {
		t.Errorf("/status session owner %+q, want it unchanged", st.Session.Owner)
	}
}
