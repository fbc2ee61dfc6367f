package fence_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/simba-go/simba/fence"
)

func TestStaleTokenError(t *testing.T) {
	var err error = &fence.StaleTokenError{Resource: "invoice-42", Token: 5, Highest: 9}
	wrapped := fmt.Errorf("charging: %w", err)
	if !errors.Is(wrapped, fence.ErrStaleToken) {
		t.Fatal("a wrapped *StaleTokenError does not match ErrStaleToken")
	}
	var stale *fence.StaleTokenError
	if !errors.As(wrapped, &stale) || stale.Highest != 9 {
		t.Fatalf("errors.As: %+v", stale)
	}
	for _, want := range []string{"invoice-42", "5", "9", "stale"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
}

func TestValidateResource(t *testing.T) {
	for _, ok := range []string{"a", "invoice-42", "orders/7", "x:y.z_~!", strings.Repeat("r", fence.MaxResourceLen)} {
		if err := fence.ValidateResource(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", " ", "a b", "tab\t", "{tag}", "a}", "é", "\x00", strings.Repeat("r", fence.MaxResourceLen+1)} {
		if err := fence.ValidateResource(bad); !errors.Is(err, fence.ErrInvalidResource) {
			t.Errorf("%q: %v, want ErrInvalidResource", bad, err)
		}
	}
	err := fence.ValidateToken(-1)
	if !errors.Is(err, fence.ErrInvalidToken) || !errors.Is(err, fence.ErrInvalidResource) {
		t.Errorf("token -1: %v, want ErrInvalidToken (and ErrInvalidResource, as before it)", err)
	}
	if err != nil && (!strings.Contains(err.Error(), "invalid token") || strings.Contains(err.Error(), "invalid resource")) {
		t.Errorf("token -1: %q should call the token invalid, not the resource", err)
	}
	if err := fence.ValidateToken(0); err != nil {
		t.Errorf("token 0: %v", err)
	}
}

// TestValidateResourceNamesTheByte: the error names the offending byte as a byte. It quoted it
// as a rune, so the first byte of "é" (0xc3) read 'Ã', a character the name does not contain.
func TestValidateResourceNamesTheByte(t *testing.T) {
	err := fence.ValidateResource("é")
	if err == nil || !strings.Contains(err.Error(), "byte 0 (0xc3)") || strings.Contains(err.Error(), "Ã") {
		t.Errorf("ValidateResource(é) = %v, want it to name byte 0 (0xc3)", err)
	}
	err = fence.ValidateResource("a b")
	if err == nil || !strings.Contains(err.Error(), "byte 1 (0x20)") {
		t.Errorf("ValidateResource(a b) = %v, want it to name byte 1 (0x20)", err)
	}
}
