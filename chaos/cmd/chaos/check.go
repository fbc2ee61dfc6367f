package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/simba-go/simba/chaos/history"
)

// runCheck runs the checkers again over a kept history (a failed run's history.jsonl), e.g.
// after a checker was fixed.
func runCheck(args []string) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	path := fs.String("history", "", "history.jsonl of a run")
	ttl := fs.Duration("ttl", time.Second, "the run's TTL")
	names := fs.String("names", "", "comma-separated names that must have a holder after every heal (default: every name seen)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	f, err := os.Open(*path)
	if err != nil {
		return err
	}
	defer f.Close()
	evs, err := history.Read(f)
	if err != nil {
		return err
	}
	cfg := history.Config{TTL: *ttl}
	if *names != "" {
		cfg.Names = strings.Split(*names, ",")
	}
	rep := history.Check(evs, cfg)
	fmt.Printf("%d terms, %d writes (%d accepted), linearizable %s\n", rep.Terms, rep.Writes, rep.Accepted, rep.Linearizable)
	for _, v := range rep.Violations {
		fmt.Println("  VIOLATION", v)
	}
	if !rep.OK() {
		return fmt.Errorf("%d violations", len(rep.Violations))
	}
	return nil
}
