package dsn

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
)

// HostList is the parsed remainder of a DSN of the form
// [user:password@]host1[:port],host2[:port][/path][?query] (ZooKeeper's and etcd's): a host list
// with commas is not a valid URL authority, so net/url cannot split it.
type HostList struct {
	// Hosts are the addresses as host:port, in DSN order, each with the default port when it
	// had none (IPv6 addresses in brackets).
	Hosts []string
	// User and Password are the unescaped user information; User is empty without one.
	User, Password string
	// Path is the unescaped path ("" when absent or "/").
	Path string
	// RawPath is the path as written, before unescaping ("" when absent or "/"): a caller for
	// which a percent-encoded '/' (%2F) cannot mean what a plain one does tells them apart here.
	RawPath string
	// Query is the parsed query (nil when absent).
	Query url.Values
}

// NoFragment refuses a # in the parts of a DSN after its user information: a DSN has no
// fragment, and a # meant as data must be percent-encoded.
func NoFragment(parts ...string) error {
	for _, p := range parts {
		if strings.ContainsRune(p, '#') {
			return errors.New("a DSN has no #fragment (percent-encode a # in a value as %23)")
		}
	}
	return nil
}

// ParseHostList parses rest, the part of a DSN after "scheme://". A host without a port gets
// defaultPort; what names a host in messages ("server", "endpoint"). Errors are plain messages
// for the caller to wrap (see Errorf): they never repeat the password.
func ParseHostList(rest string, defaultPort int, what string) (HostList, error) {
	var hl HostList
	var query string
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, query = rest[:i], rest[i+1:]
	}
	hosts, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		hosts, path = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(hosts, '@'); i >= 0 {
		userinfo := hosts[:i]
		hosts = hosts[i+1:]
		u, p, ok := strings.Cut(userinfo, ":")
		var err error
		if hl.User, err = url.PathUnescape(u); err != nil || hl.User == "" {
			return HostList{}, fmt.Errorf("bad user in user:password@")
		}
		if !ok {
			return HostList{}, fmt.Errorf("user without password; want user:password@")
		}
		if hl.Password, err = url.PathUnescape(p); err != nil {
			return HostList{}, fmt.Errorf("bad password in user:password@")
		}
	}
	if err := NoFragment(hosts, path, query); err != nil {
		return HostList{}, err
	}
	if hosts == "" {
		return HostList{}, fmt.Errorf("no %ss", what)
	}
	for _, h := range strings.Split(hosts, ",") {
		addr, err := NormaliseHost(h, defaultPort, what)
		if err != nil {
			return HostList{}, err
		}
		hl.Hosts = append(hl.Hosts, addr)
	}
	if path != "" && path != "/" {
		p, err := url.PathUnescape(path)
		if err != nil {
			return HostList{}, fmt.Errorf("bad path: %v", err)
		}
		hl.Path, hl.RawPath = p, path
	}
	if query != "" {
		vals, err := url.ParseQuery(query)
		if err != nil {
			return HostList{}, fmt.Errorf("bad query: %v", err)
		}
		hl.Query = vals
	}
	return hl, nil
}

// NormaliseHost checks host[:port] and adds defaultPort when there is none; what names a host
// in messages.
func NormaliseHost(h string, defaultPort int, what string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("empty %s in host list", what)
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// no port (or a bare IPv6 address in brackets)
		host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), strconv.Itoa(defaultPort)
		if strings.ContainsAny(host, "[]") || (strings.Contains(host, ":") && !strings.HasPrefix(h, "[")) {
			return "", fmt.Errorf("bad %s %q", what, h)
		}
	}
	if host == "" {
		return "", fmt.Errorf("%s %q has no host", what, h)
	}
	if err := CheckHostName(host, what); err != nil {
		return "", err
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%s %q has a bad port", what, h)
	}
	return net.JoinHostPort(host, strconv.Itoa(n)), nil
}

// TLSFiles are the TLS query parameters of a DSN: ca (a PEM file of the authorities to trust
// instead of the system's), cert and key (a client certificate and its key) and servername
// (the name to verify in the servers' certificates).
type TLSFiles struct{ CA, Cert, Key, ServerName string }

// Set records parameter k if it is one of the TLS parameters and reports whether it was.
// An empty value is an error.
func (f *TLSFiles) Set(k, v string) (bool, error) {
	var dst *string
	switch k {
	case "ca":
		dst = &f.CA
	case "cert":
		dst = &f.Cert
	case "key":
		dst = &f.Key
	case "servername":
		dst = &f.ServerName
	default:
		return false, nil
	}
	if v == "" {
		return true, fmt.Errorf("parameter %q is empty", k)
	}
	*dst = v
	return true, nil
}

// Config reads the files and builds the TLS configuration (TLS 1.2 or later).
func (f TLSFiles) Config() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, fmt.Errorf("ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca: %s holds no PEM certificate", f.CA)
		}
		tc.RootCAs = pool
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, fmt.Errorf("cert and key go together")
	}
	if f.Cert != "" {
		pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %v", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}
