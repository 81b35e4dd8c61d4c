package feedback

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
)

// MaxCodebookRules bounds the rules one feedback item reports using.
const MaxCodebookRules = 50

// checkRules refuses rule ids that are not the organisation's, naming
// each (field prefixes messages: "items[3].").
func checkRules(ctx context.Context, q *db.Queries, orgID uuid.UUID, it Item, field string) error {
	if len(it.CodebookRules) == 0 {
		return nil
	}
	if len(it.CodebookRules) > MaxCodebookRules {
		return errs.InvalidField(field+"codebook_rules", "at most %d rules", MaxCodebookRules)
	}
	found, err := q.CodebookRuleListIDsInOrg(ctx, db.CodebookRuleListIDsInOrgParams{OrgID: orgID, Ids: it.CodebookRules})
	if err != nil {
		return err
	}
	v := &errs.Invalid{}
	for i, id := range it.CodebookRules {
		if !slices.Contains(found, id) {
			v.Add(fmt.Sprintf("%scodebook_rules[%d]", field, i), "is not a codebook rule of this organisation")
		}
	}
	return v.Err()
}

// outcome is what a feedback item says of the rules its answer used: a
// thumbs up or a rating of 4 or 5 is helpful; a thumbs down, a rating of 1
// or 2, or a correction is harmful; anything else is neutral.
func outcome(it Item) string {
	switch {
	case it.FeedbackType == "correction" || it.Correction != "" || it.FeedbackType == "thumbs_down" || it.Rating != nil && *it.Rating <= 2:
		return "harmful"
	case it.FeedbackType == "thumbs_up" || it.Rating != nil && *it.Rating >= 4:
		return "helpful"
	}
	return "neutral"
}

// countRules records a stored feedback item's use of its rules, once.
func countRules(ctx context.Context, q *db.Queries, feedbackID uuid.UUID, it Item) error {
	if len(it.CodebookRules) == 0 {
		return nil
	}
	return q.CodebookRuleUseInsertMany(ctx, db.CodebookRuleUseInsertManyParams{FeedbackID: feedbackID, RuleIds: it.CodebookRules, Outcome: outcome(it)})
}
