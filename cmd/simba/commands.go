package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/simba-go/simba/spi"

	"github.com/simba-go/simba"

	dsnutil "github.com/simba-go/simba/internal/dsn"
)

func dsnFlags(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	dsn := fs.String("dsn", os.Getenv("SIMBA_DSN"), "backend DSN (default $SIMBA_DSN)")
	return fs, dsn
}

func needDSN(dsn string) error {
	if dsn == "" {
		return fmt.Errorf("%w: -dsn (or $SIMBA_DSN) is required", simba.ErrInvalidOption)
	}
	return nil
}

// migrate applies the embedded schema of a SQL backend.
func migrate(ctx context.Context, args []string) error {
	fs, dsn := dsnFlags("migrate")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := needDSN(*dsn); err != nil {
		return err
	}
	b, err := openBackend(ctx, *dsn)
	if err != nil {
		return err
	}
	defer b.Close()
	m, ok := b.(interface{ Migrate(context.Context) error })
	if !ok {
		fmt.Printf("%s needs no schema\n", dsnutil.Redact(*dsn))
		return nil
	}
	if err := m.Migrate(ctx); err != nil {
		return err
	}
	fmt.Printf("schema of %s is up to date\n", dsnutil.Redact(*dsn))
	return nil
}

// status prints what the backend knows: leases, sessions, groups.
func status(ctx context.Context, args []string) error {
	return statusTo(ctx, os.Stdout, args)
}

// statusTo is status writing to out.
func statusTo(ctx context.Context, out io.Writer, args []string) error {
	fs, dsn := dsnFlags("status")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := needDSN(*dsn); err != nil {
		return err
	}
	b, err := openBackend(ctx, *dsn)
	if err != nil {
		return err
	}
	defer b.Close()
	in, ok := b.(spi.Inspector)
	if !ok {
		return fmt.Errorf("%w: the backend of %s cannot list its state", simba.ErrInvalidOption, dsnutil.Redact(*dsn))
	}
	snap, err := in.Inspect(ctx)
	if err != nil {
		return err
	}
	return printStatus(out, snap)
}

// printStatus prints a snapshot as tables. Every string in it comes from backend records that
// anyone with write access to the backend can forge, so each goes through safe: no control
// character (a terminal escape sequence) or invalid UTF-8 reaches the terminal.
func printStatus(out io.Writer, snap spi.Snapshot) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "LEASE\tTOKEN\tHOLDER\tOWNER\tREMAINING")
	for _, l := range snap.Leases {
		holder, owner, rem := safe(string(l.Holder)), safe(l.Owner), l.Remaining.Round(time.Millisecond).String()
		if l.Holder == "" {
			holder, rem = "-", "-"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", safe(l.Name), l.Token, holder, owner, rem)
	}
	fmt.Fprintln(w, "\nSESSION\tOWNER\tREMAINING")
	for _, s := range snap.Sessions {
		fmt.Fprintf(w, "%s\t%s\t%s\n", safe(string(s.ID)), safe(s.Owner), s.Remaining.Round(time.Millisecond))
	}
	groups := make([]string, 0, len(snap.Groups))
	for g := range snap.Groups {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	fmt.Fprintln(w, "\nGROUP\tMEMBERS")
	for _, g := range groups {
		members := make([]string, len(snap.Groups[g]))
		for i, m := range snap.Groups[g] {
			members[i] = safe(string(m))
		}
		fmt.Fprintf(w, "%s\t[%s]\n", safe(g), strings.Join(members, " "))
	}
	return w.Flush()
}

// safe returns s unchanged when it is valid UTF-8 made only of graphic characters (letters,
// marks, numbers, punctuation, symbols, spaces) other than '"', and otherwise as a quoted Go
// string literal (strconv.QuoteToGraphic): control characters, format characters such as
// bidirectional overrides, and invalid bytes become \x.., \u.... escapes.
func safe(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || r == '"' || !unicode.IsGraphic(r) {
			return strconv.QuoteToGraphic(s)
		}
	}
	return s
}

// escapeControls returns s with each control or format character and each invalid byte
// replaced by its Go escape (\x1b, \u202e, \xff), leaving everything else as it is: for
// messages (errors) that may quote backend-provided strings.
func escapeControls(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case r != ' ' && !unicode.IsGraphic(r):
			q := strconv.QuoteRuneToGraphic(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[:size])
		}
		s = s[size:]
	}
	return b.String()
}

// runCommand runs a command while this process leads (run) or holds the lock (lock) -name.
// When leadership is lost the command is sent SIGTERM (then killed after -grace); the fencing
// token is passed in $SIMBA_TOKEN. The exit status is the command's.
func runCommand(ctx context.Context, args []string, lock bool) error {
	name := "run"
	if lock {
		name = "lock"
	}
	fs, dsn := dsnFlags(name)
	lease := fs.String("name", "", "lease name")
	ttl := fs.Duration("ttl", simba.DefaultTTL, "session TTL")
	grace := fs.Duration("grace", 5*time.Second, "time the command has to exit after SIGTERM")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := needDSN(*dsn); err != nil {
		return err
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return fmt.Errorf("%w: no command given (simba %s -dsn D -name N -- CMD [ARGS])", simba.ErrInvalidOption, name)
	}
	b, err := openBackend(ctx, *dsn)
	if err != nil {
		return err
	}
	defer b.Close()
	c, err := simba.New(b, simba.WithTTL(*ttl))
	if err != nil {
		return err
	}
	defer c.Close(context.WithoutCancel(ctx))

	run := func(ctx context.Context, t simba.Term) error {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.Env = append(os.Environ(), fmt.Sprintf("SIMBA_TOKEN=%d", t.Token()), "SIMBA_LEASE="+t.Name())
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
		cmd.WaitDelay = *grace
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) && ctx.Err() == nil {
			return exitCode(exit.ExitCode())
		}
		if ctx.Err() != nil {
			return fmt.Errorf("leadership of %s lost: %w", t.Name(), context.Cause(ctx))
		}
		return err
	}

	if lock {
		return c.WithLock(ctx, *lease, run)
	}
	done := make(chan error, 1)
	e, err := c.NewElection(*lease, simba.RunWhileLeader(func(ctx context.Context, t simba.Term) error {
		err := run(ctx, t)
		select {
		case done <- err:
		default:
		}
		return err
	}))
	if err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return err
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
