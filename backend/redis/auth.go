package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba/spi"
)

// ErrAuth matches (errors.Is) a permanent error by which the server refused the client's
// credentials or the backend refused to run without them: a wrong password or an unknown
// user (the server's WRONGPASS), a command sent without the authentication the server
// requires (NOAUTH), and a password given for the default user (redis://:password@host, or
// user default) at a server that has no password configured for it. Redis accepts any password
// there (HELLO's and the two-argument AUTH's "nopass"), so go-redis would run without the
// authentication the DSN asked for; the first OpenSession refuses it instead (see
// checkPassword), with an error that also matches spi.ErrInvalidOption: drop the password from
// the DSN or configure one on the server.
//
// It matches spi.ErrAccessDenied (simba.ErrAccessDenied) too, as does a server's refusal of a
// command, key or channel to an ACL user (NOPERM), which is not an ErrAuth.
var ErrAuth error = authError{}

// authError is ErrAuth: a sentinel that matches spi.ErrAccessDenied too.
type authError struct{}

func (authError) Error() string { return "redis: authentication failed" }
func (authError) Unwrap() error { return spi.ErrAccessDenied }

// denied wraps a server's refusal of the client's credentials (WRONGPASS, NOAUTH: ErrAuth) or
// of a privilege (NOPERM) from operation op so that it matches spi.ErrAccessDenied
// (permanent), saying which, for which user at which server, and what to do. It returns nil
// for other errors.
func (b *Backend) denied(op string, err error) error {
	user, addrs := "default", ""
	switch c := b.c.(type) {
	case *goredis.Client:
		if o := c.Options(); o.Username != "" {
			user = o.Username
		}
		addrs = c.Options().Addr
		if addrs == "FailoverClient" { // go-redis's name for a master found through Sentinel
			addrs = "the Sentinel's master"
		}
	case *goredis.ClusterClient:
		if o := c.Options(); o.Username != "" {
			user = o.Username
		}
		addrs = strings.Join(c.Options().Addrs, ",")
	}
	switch {
	case goredis.HasErrorPrefix(err, "WRONGPASS"):
		return fmt.Errorf("redis: %s: %w: the server at %s refused the credentials of user %q (an incorrect password, an unknown or disabled user): fix the DSN's user and password, or the server's ACL: %w", op, ErrAuth, addrs, user, err)
	case goredis.HasErrorPrefix(err, "NOAUTH"):
		return fmt.Errorf("redis: %s: %w: the server at %s requires authentication, and the DSN gives no password: add the user and password to the DSN (redis://user:password@host): %w", op, ErrAuth, addrs, err)
	case goredis.HasErrorPrefix(err, "NOPERM"):
		return spi.AccessDenied("redis: "+op, fmt.Sprintf("privilege refused: the server at %s refused ACL user %q a command, key or channel Simba needs: grant it the keys ~simba:*, the channels &simba:* and the commands the package documentation lists (ACL SETUSER)", addrs, user), err)
	}
	return nil
}

// errNoPasswordConfigured is the text of Redis's reply to a one-argument AUTH when the default
// user has no password ("nopass"): "ERR AUTH <password> called without any password configured
// for the default user. Are you sure your configuration is correct?" (redis-cli -a prints it as
// "AUTH failed", then goes on unauthenticated).
const errNoPasswordConfigured = "called without any password configured"

// authFailure reports a server's refusal of the client's credentials: WRONGPASS or NOAUTH.
func authFailure(err error) bool {
	return goredis.HasErrorPrefix(err, "WRONGPASS") || goredis.HasErrorPrefix(err, "NOAUTH")
}

// checkPassword refuses a password for the default user at a server that configures none: it
// sends the one-argument AUTH, which Redis answers with errNoPasswordConfigured when the default
// user has no password (where HELLO's and the two-argument AUTH, which go-redis sends, accept
// any), on one connection of each server (on a Cluster, each master). A client without a
// password, or with the password of another user than default (whom the server checks), is
// not checked. Any other outcome of the AUTH (OK: the server checked the password) passes; a
// server that cannot be reached returns that error, retryable.
func (b *Backend) checkPassword(ctx context.Context) error {
	check := func(ctx context.Context, c *goredis.Client) error {
		o := c.Options()
		if o.Password == "" || (o.Username != "" && o.Username != "default") {
			return nil
		}
		conn := c.Conn()
		defer conn.Close()
		err := conn.Auth(ctx, o.Password).Err()
		switch {
		case err == nil, authFailure(err):
			return err
		case strings.Contains(err.Error(), errNoPasswordConfigured):
			return spi.AsPermanent(fmt.Errorf("%w: %w: the DSN gives a password for the default user, but the server at %s has none configured, so the connection would run unauthenticated (Redis accepts any password then); drop the password from the DSN, or set one on the server (requirepass, or ACL SETUSER default on >password): %w",
				ErrAuth, spi.ErrInvalidOption, o.Addr, err))
		}
		var re goredis.Error
		if errors.As(err, &re) {
			return nil // the server's own answer, which says nothing of a missing password
		}
		return err
	}
	switch c := b.c.(type) {
	case *goredis.Client:
		return check(ctx, c)
	case *goredis.ClusterClient:
		// Without a password for the default user there is nothing to check: no call, not
		// even the slot map's (a silent Cluster held OpenSession here, and a reload of the
		// slot map that an earlier, cancelled OpenSession started failed this one with that
		// call's context.Canceled).
		if o := c.Options(); o.Password == "" || (o.Username != "" && o.Username != "default") {
			return nil
		}
		err := c.ForEachMaster(ctx, check)
		if errors.Is(err, context.Canceled) && !errors.Is(ctx.Err(), context.Canceled) {
			// The slot map's reload is shared: its cancellation was another call's.
			err = spi.Unavailable("password check", err)
		}
		return err
	}
	return nil
}

// passwordChecked runs checkPassword once per Backend, at the first OpenSession, and keeps its
// verdict (a server that could not be reached is checked again at the next one).
func (b *Backend) passwordChecked(ctx context.Context) error {
	return b.authCheck.run(func() (bool, error) {
		err := b.checkPassword(ctx)
		if err != nil && spi.Classify(err) != spi.Permanent {
			return false, b.fail("open session: password check", err)
		}
		return true, err
	})
}
