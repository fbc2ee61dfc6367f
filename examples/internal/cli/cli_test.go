package cli

import (
	"io"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	newFlags := func() *Flags {
		f := NewFlags("prog", "sqlite:///x.db", SQLUsage, 10*time.Second)
		f.AddOwner("process")
		f.SetOutput(io.Discard)
		return f
	}

	f := newFlags()
	if ok, err := f.Parse([]string{"-dsn", "redis://h:1", "-owner", "a", "-for", "2s"}); !ok || err != nil {
		t.Fatalf("Parse = %v, %v; want true, nil", ok, err)
	}
	if f.DSN != "redis://h:1" || f.Owner != "a" || f.For != 2*time.Second {
		t.Errorf("flags %q %q %v, want redis://h:1 a 2s", f.DSN, f.Owner, f.For)
	}

	if ok, err := newFlags().Parse([]string{"-h"}); ok || err != nil {
		t.Errorf("Parse(-h) = %v, %v; want false, nil (help is not an error)", ok, err)
	}
	if ok, err := newFlags().Parse([]string{"-bogus"}); ok || err == nil {
		t.Errorf("Parse(-bogus) = %v, %v; want false and an error", ok, err)
	}

	f = newFlags()
	if ok, err := f.Parse(nil); !ok || err != nil || f.DSN != "sqlite:///x.db" || f.Owner != "" || f.For != 10*time.Second {
		t.Errorf("Parse(nil) = %v, %v with %q %q %v; want the defaults", ok, err, f.DSN, f.Owner, f.For)
	}
}
