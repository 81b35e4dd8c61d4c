package review

import (
	"slices"
	"strings"
)

// Rules decide when the reviewers of an item disagree, one rule per kind
// of label. Statuses must always match (and with them the verdict, thumbs
// up or down); ratings and each rated dimension may differ by up to a
// tolerance; tags must match only when asked, since reviewers tag at
// different depths. A correction's wording never counts: two good
// corrections rarely read the same.
type Rules struct {
	RatingTolerance    int  `json:"rating_tolerance"`    // ratings more than this apart disagree
	DimensionTolerance int  `json:"dimension_tolerance"` // so do scores of one dimension
	TagsMustMatch      bool `json:"tags_must_match"`
}

// DefaultRules: statuses differ, or ratings or a dimension's scores more
// than 1 apart.
var DefaultRules = Rules{RatingTolerance: 1, DimensionTolerance: 1}

// MaxTolerance bounds a tolerance: scores run from 1 to 5.
const MaxTolerance = 4

// The kinds of label a disagreement names.
const (
	KindStatus     = "status"
	KindRating     = "rating"
	KindDimensions = "dimensions"
	KindTags       = "tags"
)

// Label is one reviewer's submitted label, as the rules read it. Nil
// scores were not given.
type Label struct {
	Status     string
	Rating     *int
	Dimensions [4]*int // accuracy, helpfulness, clarity, safety
	Tags       []string
	Correction string
}

// Disagreements are the kinds of label the reviewers disagree on, in the
// order status, rating, dimensions, tags; none when they agree. A score
// only some reviewers gave is compared among those who gave it.
func (r Rules) Disagreements(labels []Label) []string {
	var out []string
	if len(labels) < 2 {
		return out
	}
	for _, l := range labels[1:] {
		if l.Status != labels[0].Status {
			out = append(out, KindStatus)
			break
		}
	}
	if spread(labels, func(l Label) *int { return l.Rating }) > r.RatingTolerance {
		out = append(out, KindRating)
	}
	for d := range 4 {
		if spread(labels, func(l Label) *int { return l.Dimensions[d] }) > r.DimensionTolerance {
			out = append(out, KindDimensions)
			break
		}
	}
	if r.TagsMustMatch {
		first := sortedTags(labels[0].Tags)
		for _, l := range labels[1:] {
			if !slices.Equal(first, sortedTags(l.Tags)) {
				out = append(out, KindTags)
				break
			}
		}
	}
	return out
}

// spread is the largest difference between two given scores; 0 with fewer
// than two.
func spread(labels []Label, score func(Label) *int) int {
	lo, hi, n := 0, 0, 0
	for _, l := range labels {
		s := score(l)
		if s == nil {
			continue
		}
		if n == 0 || *s < lo {
			lo = *s
		}
		if n == 0 || *s > hi {
			hi = *s
		}
		n++
	}
	return hi - lo
}

func sortedTags(tags []string) []string {
	out := slices.Clone(tags)
	slices.SortFunc(out, strings.Compare)
	return out
}

// Thumb is a status as a verdict on the answer: "up" when it was approved
// as given, "down" when it was rejected or needed correcting.
func Thumb(status string) string {
	if status == "approved" {
		return "up"
	}
	return "down"
}
