package tck

import (
	"errors"
	"strings"
	"testing"

	"github.com/simba-go/simba/generated/wire"
	"github.com/simba-go/simba/spi"
)

// sessionInvalidOwner: OpenSession rejects an owner that breaks wire.ValidateOwner (NUL,
// terminal escapes, a bidirectional override, a zero-width space, invalid UTF-8, too long,
// empty) with an error matching both spi.ErrInvalidOption and wire.ErrInvalidOwner — never a
// driver error, and no session is opened.
func (h *harness) sessionInvalidOwner(t *testing.T) {
	b := h.backend(t)
	for _, owner := range []string{"nul\x00owner", "esc\x1b[2J", "bad\xffutf8", "new\nline", "rtl\u202eowner", "zero\u200bwidth", "", strings.Repeat("o", wire.MaxOwnerLen+1)} {
		s, err := b.OpenSession(ctx(t), owner, h.long)
		if err == nil {
			b.CloseSession(ctx(t), s.ID)
		}
		if !errors.Is(err, spi.ErrInvalidOption) || !errors.Is(err, wire.ErrInvalidOwner) {
			t.Errorf("OpenSession with owner %+q: err = %v, want spi.ErrInvalidOption and wire.ErrInvalidOwner", owner, err)
		}
	}
}
