package datasets

import (
	"errors"
	"strings"
	"testing"

	"github.com/curate/curate/internal/errs"
)

func TestTransitionTable(t *testing.T) {
	// The lifecycle as the issue states it, written out in full: every
	// pair not listed is refused.
	allowed := map[[2]string]bool{
		{"draft", "curating"}: true, {"draft", "archived"}: true,
		{"curating", "draft"}: true, {"curating", "ready"}: true, {"curating", "archived"}: true,
		{"ready", "curating"}: true, {"ready", "exported"}: true, {"ready", "archived"}: true,
		{"exported", "curating"}: true, {"exported", "archived"}: true,
	}
	for _, from := range Statuses {
		for _, to := range Statuses {
			want := allowed[[2]string{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("%s → %s: allowed %v, want %v", from, to, got, want)
			}
			err := checkTransition(from, to)
			if (err == nil) != want {
				t.Errorf("%s → %s: error %v", from, to, err)
			}
			var inv *errs.Invalid
			if err != nil && (!errors.As(err, &inv) || inv.Errors[0].Field != "status") {
				t.Errorf("%s → %s: want an invalid status field, got %v", from, to, err)
			}
		}
	}
	err := checkTransition("draft", "exported")
	if err == nil || !strings.Contains(err.Error(), "from draft a dataset can go to curating or archived") {
		t.Errorf("draft → exported: %v", err)
	}
	if err := checkTransition("draft", "frozen"); err == nil || !strings.Contains(err.Error(), "must be one of") {
		t.Errorf("unknown status: %v", err)
	}
}

func TestExportable(t *testing.T) {
	for status, ok := range map[string]bool{"draft": false, "curating": false, "ready": true, "exported": true, "archived": false} {
		err := exportable(status)
		if (err == nil) != ok {
			t.Errorf("%s: exportable error %v", status, err)
		}
		var c *errs.Conflict
		if err != nil && !errors.As(err, &c) {
			t.Errorf("%s: want a conflict, got %T", status, err)
		}
	}
}
