package spi

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
)

// TestTLSFailuresArePermanent: every kind of TLS failure is recognised and permanent, however
// it is wrapped (a net.OpError, as crypto/tls and the drivers return them, or ErrUnavailable
// by a backend that did not look), and ordinary network failures stay retryable.
func TestTLSFailuresArePermanent(t *testing.T) {
	for _, err := range []error{
		&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}},
		x509.HostnameError{Certificate: &x509.Certificate{}, Host: "127.0.0.1"},
		x509.CertificateInvalidError{Reason: x509.Expired},
		tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"},
		&net.OpError{Op: "remote error", Net: "tcp", Err: errors.New("tls: handshake failure")},
		fmt.Errorf("dial: %w", &net.OpError{Op: "write", Net: "tcp", Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}),
		Unavailable("op", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}),
		TLSFailure("op", errors.New("server refused TLS connection")),
		TLSFailure("outer", TLSFailure("inner", io.EOF)),
	} {
		if !IsTLSError(err) || Classify(err) != Permanent {
			t.Errorf("%v (%T): IsTLSError %v, class %v; want a permanent TLS failure", err, err, IsTLSError(err), Classify(err))
		}
	}
	if err := TLSFailure("op", io.EOF); !errors.Is(err, ErrTLS) || !errors.Is(err, io.EOF) {
		t.Errorf("TLSFailure = %v: want ErrTLS and the cause", err)
	}
	for _, err := range []error{
		io.EOF,
		&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")},
		&net.OpError{Op: "read", Net: "tcp", Err: errors.New("i/o timeout")},
		Unavailable("op", errors.New("connection reset")),
	} {
		if IsTLSError(err) || Classify(err) != Retryable {
			t.Errorf("%v: IsTLSError %v, class %v; want a retryable non-TLS error", err, IsTLSError(err), Classify(err))
		}
	}
}

// ValidateName is the wire grammar: its errors match ErrInvalidName and are permanent.
func TestValidateName(t *testing.T) {
	for _, name := range []string{"a", "orders.7", "A-b_c:d", strings.Repeat("n", 128)} {
		if err := ValidateName(name); err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", name, err)
		}
	}
	for _, name := range []string{"", ".", "..", "a b", "a/b", "é", strings.Repeat("n", 129)} {
		if err := ValidateName(name); !errors.Is(err, ErrInvalidName) || Classify(err) != Permanent {
			t.Errorf("ValidateName(%q) = %v, want a permanent ErrInvalidName", name, err)
		}
	}
}

// TestAccessDenied: AccessDenied's error matches ErrAccessDenied and the cause, is permanent
// (inside Unavailable too), says what between the operation and the cause, and wraps a cause
// that already matches ErrAccessDenied without repeating it.
func TestAccessDenied(t *testing.T) {
	cause := errors.New("WRONGPASS")
	err := AccessDenied("open session", "authentication refused", cause)
	if !errors.Is(err, ErrAccessDenied) || !errors.Is(err, cause) || Classify(err) != Permanent ||
		Classify(Unavailable("op", err)) != Permanent ||
		err.Error() != "simba: access denied: open session: authentication refused: WRONGPASS" {
		t.Errorf("AccessDenied = %q (class %v): want a permanent ErrAccessDenied wrapping the cause", err, Classify(err))
	}
	if err := AccessDenied("outer", "", err); strings.Count(err.Error(), "access denied") != 1 || !errors.Is(err, ErrAccessDenied) {
		t.Errorf("AccessDenied of an ErrAccessDenied = %q: want the sentinel once", err)
	}
	if Classify(ErrAccessDenied) != Permanent {
		t.Error("ErrAccessDenied is not permanent")
	}
}
