package keyset

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/errs"
)

func TestRoundTrip(t *testing.T) {
	c := Cursor{At: time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC), ID: uuid.New()}
	got, err := Parse("pairs", c.Encode("pairs"))
	if err != nil || got == nil || !got.At.Equal(c.At) || got.ID != c.ID {
		t.Fatalf("Parse(Encode) = %+v, %v; want %+v", got, err, c)
	}
	if got, err := Parse("pairs", ""); got != nil || err != nil {
		t.Fatalf("empty cursor = %v, %v; want first page", got, err)
	}
}

func TestRefused(t *testing.T) {
	other := Cursor{At: time.Now(), ID: uuid.New()}.Encode("feedback")
	for _, s := range []string{other, "!!", "bm90IGEgY3Vyc29y", Cursor{}.Encode("pairs") + "x"} {
		_, err := Parse("pairs", s)
		var inv *errs.Invalid
		if !errors.As(err, &inv) || inv.Errors[0].Field != "cursor" {
			t.Errorf("Parse(%q) = %v; want an invalid cursor field", s, err)
		}
	}
}

func TestPage(t *testing.T) {
	rows := []int{5, 4, 3}
	key := func(i int) Cursor { return Cursor{ID: uuid.UUID{byte(i)}} }
	got, next := Page(rows, 2, key)
	if len(got) != 2 || next == nil || next.ID[0] != 4 {
		t.Fatalf("Page(3 rows, 2) = %v, %v; want 2 rows and a cursor at 4", got, next)
	}
	if got, next := Page(rows, 3, key); len(got) != 3 || next != nil {
		t.Fatalf("Page(3 rows, 3) = %v, %v; want the last page", got, next)
	}
}

func TestSeq(t *testing.T) {
	if n, err := ParseSeq("audit", EncodeSeq("audit", 4711)); n != 4711 || err != nil {
		t.Fatalf("ParseSeq(EncodeSeq(4711)) = %d, %v", n, err)
	}
	if n, err := ParseSeq("audit", ""); n != 0 || err != nil {
		t.Fatalf("empty = %d, %v; want the first page", n, err)
	}
	for _, s := range []string{EncodeSeq("alerts", 3), Cursor{ID: uuid.New()}.Encode("audit"), EncodeSeq("audit", 0), "%%"} {
		if _, err := ParseSeq("audit", s); err == nil {
			t.Errorf("ParseSeq(%q) accepted", s)
		}
	}
}

func TestInOrder(t *testing.T) {
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	rows := []uuid.UUID{c, a} // b was deleted; the read came back unordered
	got := InOrder([]uuid.UUID{a, b, c}, rows, func(r uuid.UUID) uuid.UUID { return r }, func(r uuid.UUID) string { return r.String() })
	if len(got) != 2 || got[0] != a.String() || got[1] != c.String() {
		t.Fatalf("InOrder = %v; want a then c", got)
	}
}
