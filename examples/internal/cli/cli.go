// Package cli is what the examples' commands share around their own work: main's signal
// handling and exit status, the flags most of them take (-dsn, -owner, -for) and a client with
// a short TTL. It holds no Simba logic: each example's main.go shows what it does with the
// client.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/spi"
)

// TTL is the lease TTL of the clients Client returns: short, so that a takeover after a
// crash is quick to watch.
const TTL = 3 * time.Second

// SQLUsage describes the -dsn flag of the examples that take any of package backend/sql's DSNs.
const SQLUsage = "sqlite://, postgres:// or mysql:// DSN"

// SQLiteDSN is the default -dsn of the examples that run on one host: a SQLite file in the
// temporary directory, shared by every example.
var SQLiteDSN = "sqlite://" + filepath.Join(os.TempDir(), "simba-example.db")

// Main runs run with the command's arguments and standard output, under a context that
// SIGINT (Ctrl-C) or SIGTERM cancels, and exits with status 1, printing the error prefixed by
// program, if it fails.
func Main(program string, run func(ctx context.Context, args []string, stdout io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, program+":", err)
		os.Exit(1)
	}
}

// Flags is an example's flag set with the flags the examples share: -dsn and -for, and -owner
// once AddOwner has defined it. Define the example's own flags on the embedded FlagSet.
type Flags struct {
	*flag.FlagSet
	DSN   string        // -dsn: the backend's DSN
	Owner string        // -owner: who this process is, as the holder shows ("" for the default)
	For   time.Duration // -for: how long to run
}

// NewFlags returns the flags of program, with -dsn (default dsn, described by dsnUsage) and
// -for (default runFor). Parse returns errors instead of exiting.
func NewFlags(program, dsn, dsnUsage string, runFor time.Duration) *Flags {
	f := &Flags{FlagSet: flag.NewFlagSet(program, flag.ContinueOnError)}
	f.StringVar(&f.DSN, "dsn", dsn, dsnUsage)
	f.DurationVar(&f.For, "for", runFor, "how long to run")
	return f
}

// AddOwner defines -owner, described as "who this <who> is".
func (f *Flags) AddOwner(who string) {
	f.StringVar(&f.Owner, "owner", "", "who this "+who+" is, as the holder shows (default host:pid)")
}

// Parse parses args. It returns false when the program should return at once, with the error
// to return: nil when args asked for help (-h; the usage is printed), else the parse error.
func (f *Flags) Parse(args []string) (bool, error) {
	if err := f.FlagSet.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// Client returns a client on backend with the short TTL and owner as its owner ("" for the
// default, host:pid). The caller closes it.
func Client(backend spi.Backend, owner string) (*simba.Client, error) {
	opts := []simba.Option{simba.WithTTL(TTL)}
	if owner != "" {
		opts = append(opts, simba.WithOwner(owner))
	}
	return simba.New(backend, opts...)
}
