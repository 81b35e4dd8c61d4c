package datasets

import (
	"fmt"
	"slices"
	"strings"

	"github.com/curate/curate/internal/errs"
)

// Statuses a dataset moves through.
const (
	StatusDraft    = "draft"
	StatusCurating = "curating"
	StatusReady    = "ready"
	StatusExported = "exported"
	StatusArchived = "archived"
)

// Statuses lists every status in lifecycle order.
var Statuses = []string{StatusDraft, StatusCurating, StatusReady, StatusExported, StatusArchived}

// transitions are the allowed moves. Going back from ready or exported to
// curating is how a frozen dataset is edited: the next freeze makes a new
// version and the old one stays as it was. Archiving is final.
var transitions = map[string][]string{
	StatusDraft:    {StatusCurating, StatusArchived},
	StatusCurating: {StatusDraft, StatusReady, StatusArchived},
	StatusReady:    {StatusCurating, StatusExported, StatusArchived},
	StatusExported: {StatusCurating, StatusArchived},
	StatusArchived: {},
}

// CanTransition reports whether a dataset may go from one status to another.
func CanTransition(from, to string) bool {
	return slices.Contains(transitions[from], to)
}

// checkTransition explains a refused move, naming where the dataset can go.
func checkTransition(from, to string) error {
	if !slices.Contains(Statuses, to) {
		return errs.InvalidField("status", "must be one of %s", strings.Join(Statuses, ", "))
	}
	if CanTransition(from, to) {
		return nil
	}
	next := transitions[from]
	if len(next) == 0 {
		return errs.InvalidField("status", "the dataset is %s; an archived dataset cannot change", from)
	}
	return errs.InvalidField("status", "cannot go from %s to %s; from %s a dataset can go to %s", from, to, from, strings.Join(next, " or "))
}

// exportable reports whether a dataset in this status has a frozen version
// to export, with the error to show when not.
func exportable(status string) error {
	switch status {
	case StatusReady, StatusExported:
		return nil
	case StatusArchived:
		return &errs.Conflict{Message: "the dataset is archived; archived datasets are not exported"}
	}
	return &errs.Conflict{Message: fmt.Sprintf("the dataset is %s: mark it ready (which freezes a version) before exporting", status)}
}
