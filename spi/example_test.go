package spi_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"os"

	"github.com/simba-go/simba/spi"
)

// A backend wraps each failure so that the client can tell a transient one (it retries) from
// one that will not heal (it reports it), and so that errors.Is still finds both the sentinel
// and the driver's own error.
func ExampleClassify() {
	timeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	refused := errors.New("WRONGPASS invalid username-password pair")

	for _, err := range []error{
		spi.Unavailable("keep-alive", timeout),                                    // transient: retried
		spi.AsPermanent(fmt.Errorf("mybackend: authenticate: %w", refused)),       // will not heal
		fmt.Errorf("mybackend: table simba_lease: %w", spi.ErrSchemaMissing),      // a sentinel
		spi.TLSFailure("dial", tls.RecordHeaderError{Msg: "not a TLS handshake"}), // fix the DSN's TLS
		fmt.Errorf("mybackend: acquire: %w", context.DeadlineExceeded),            // outcome unknown
	} {
		fmt.Printf("%-9s unavailable=%-5v %v\n", spi.Classify(err), errors.Is(err, spi.ErrUnavailable), err)
	}
	// Output:
	// retryable unavailable=true  simba: backend unavailable: keep-alive: read tcp: i/o timeout
	// permanent unavailable=false mybackend: authenticate: WRONGPASS invalid username-password pair
	// permanent unavailable=false mybackend: table simba_lease: simba: schema missing
	// permanent unavailable=false simba: TLS failure: dial: tls: not a TLS handshake
	// retryable unavailable=false mybackend: acquire: context deadline exceeded
}

// Servers report times in milliseconds; Millis converts them and saturates instead of
// overflowing on a record written by hand with an expiry centuries away.
func ExampleMillis() {
	fmt.Println(spi.Millis(1500), spi.Millis(-20))
	fmt.Println(spi.Millis(math.MaxInt64) <= spi.MaxReplyDuration)
	// Output:
	// 1.5s -20ms
	// true
}
