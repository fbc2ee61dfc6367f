package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestREADMEExitStatuses: the README's table of exit statuses says what `simba -h` says, row
// by row (the README's backticks aside), so that the two cannot drift apart.
func TestREADMEExitStatuses(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	help := make(map[string]string) // status → meaning, its lines joined
	var last string
	for _, line := range strings.Split(strings.TrimPrefix(exitStatuses, "exit status:\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if f := strings.Fields(line); !strings.HasPrefix(line, "   ") {
			last = f[0]
			help[last] = strings.Join(f[1:], " ")
		} else {
			help[last] += " " + strings.Join(f, " ")
		}
	}
	row := regexp.MustCompile("(?m)^\\| (0|1|2|3|75|127|128\\+n|other) \\| (.+) \\|$")
	rows := row.FindAllStringSubmatch(string(readme), -1)
	if len(rows) != len(help) {
		t.Fatalf("README.md has %d exit status rows, simba -h %d", len(rows), len(help))
	}
	for _, r := range rows {
		got := strings.Join(strings.Fields(strings.ReplaceAll(r[2], "`", "")), " ")
		if got != help[r[1]] {
			t.Errorf("exit status %s:\nREADME.md: %s\nsimba -h:  %s", r[1], got, help[r[1]])
		}
	}
}
