package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkerHealth: a worker's panic, data race, failed Close or failed rejoin after a churn in
// its stderr fails the run, as does a worker the harness had to kill after SIGTERM; a worker that
// exited on its own with only backend warnings in its stderr does not.
func TestWorkerHealth(t *testing.T) {
	dir := t.TempDir()
	write := func(base, s string) {
		if err := os.WriteFile(filepath.Join(dir, base+".stderr"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("w1", "time=x level=WARN msg=\"simba backend error\" op=keep-alive\n")
	write("w2", "panic: boom\n\ngoroutine 1 [running]:\n")
	write("w3", "chaos: client close: simba: close: context deadline exceeded\n")
	write("w4", "")
	write("w5", "chaos: churn: JoinGroup after a stop or leave: simba: already joined on this client\n")
	exited := exec.Command("true")
	if err := exited.Run(); err != nil {
		t.Fatal(err)
	}
	killed := exec.Command("sleep", "60")
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	killed.Process.Kill()
	killed.Wait()
	r := &runner{dir: dir, workers: []*workerProc{
		{id: "w1.1", base: "w1", cmd: exited},
		{id: "w2.1", base: "w2", cmd: exited},
		{id: "w3.1", base: "w3", cmd: exited},
		{id: "w4.1", base: "w4", cmd: killed},
		{id: "w5.1", base: "w5", cmd: exited},
	}}
	var got []string
	for _, v := range r.workerHealth(true) {
		got = append(got, v.String())
	}
	want := []string{"worker w2: panic: boom", "worker w3: chaos: client close:", "worker w4.1: did not exit", "worker w5: chaos: churn:"}
	if len(got) != len(want) {
		t.Fatalf("got %d violations %q, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("violation %d: %q, want prefix %q", i, got[i], w)
		}
	}
	if vs := r.workerHealth(false); len(vs) != 3 {
		t.Errorf("without the kill at the end: %d violations %v, want the 3 stderr ones", len(vs), vs)
	}
}
