package codebook

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
)

// SimilarAt is the trigram similarity from which a rule is shown as a
// near-duplicate of one being added: reworded copies of one rule score
// 0.6–0.9, rules on one subject that say different things below 0.5.
const SimilarAt = 0.55

// Similar is a rule close to another, with how close (0–1).
type Similar struct {
	Rule
	Similarity float64 `json:"similarity"`
}

// Similar lists the codebook's rules (not retired) whose text is close to
// content, closest first; except is left out (the rule itself).
func (s *Service) Similar(ctx context.Context, orgID uuid.UUID, name, content string, except uuid.UUID) ([]Similar, error) {
	q := db.New(s.Pool)
	b, err := book(ctx, q, orgID, name)
	if errors.Is(err, errs.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return similar(ctx, q, b.ID, content, except)
}

func similar(ctx context.Context, q *db.Queries, bookID uuid.UUID, content string, except uuid.UUID) ([]Similar, error) {
	rows, err := q.CodebookRuleListSimilar(ctx, db.CodebookRuleListSimilarParams{CodebookID: bookID, Content: content,
		Threshold: SimilarAt, ExceptID: except})
	if err != nil {
		return nil, err
	}
	out := make([]Similar, len(rows))
	for i, r := range rows {
		out[i] = Similar{Rule: ruleOf(r.CodebookRule), Similarity: r.Similarity}
	}
	return out, nil
}

// MergeInto folds a new rule into an existing one instead of adding a
// second copy: the new rule's sources join the existing rule's, whose text
// and counters stay. A suggestion merged this way is accepted as that rule.
func (s *Service) MergeInto(ctx context.Context, actor audit.Actor, orgID uuid.UUID, name string, into uuid.UUID, in NewRule) (Rule, error) {
	if len(in.SourceFeedbackIDs) > MaxSources {
		return Rule{}, errs.InvalidField("source_feedback_ids", "at most %d", MaxSources)
	}
	var out db.CodebookRule
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		b, err := book(ctx, q, orgID, name)
		if err != nil {
			return err
		}
		if err := checkSources(ctx, q, orgID, in.SourceFeedbackIDs); err != nil {
			return err
		}
		out, err = q.CodebookRuleUpdateMerge(ctx, db.CodebookRuleUpdateMergeParams{OrgID: orgID, CodebookID: b.ID, ID: into,
			SourceFeedbackIds: nonNil(in.SourceFeedbackIDs)})
		if errors.Is(err, pgx.ErrNoRows) {
			return errs.InvalidField("merge_into", "name a rule of this codebook")
		}
		if err != nil {
			return err
		}
		if in.SuggestionID != nil {
			if err := markAccepted(ctx, q, orgID, b.ID, *in.SuggestionID, out.ID); err != nil {
				return err
			}
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "codebook.rule_merge", TargetType: "codebook_rule",
			TargetID: out.ID.String(), Details: map[string]any{"codebook": name, "merged": in.Content}})
	})
	return ruleOf(out), err
}

// DefaultBudget is a new codebook's token budget (the column's default,
// migration 00028).
const DefaultBudget = 2000

// BudgetUse is how the active rules fit the codebook's token budget.
type BudgetUse struct {
	Budget int // tokens the assistant's prompt leaves the codebook
	Used   int // tokens the active rules take as prompt text
	Active int // active rules
	Fit    int // active rules that fit, in the order they are written
}

// Over is true when some active rules would be cut from the prompt.
func (b BudgetUse) Over() bool { return b.Used > b.Budget }

// Budget measures the active rules against the codebook's token budget,
// as the next published version's prompt would be written.
func (s *Service) Budget(ctx context.Context, orgID uuid.UUID, name string) (BudgetUse, error) {
	q := db.New(s.Pool)
	b, err := book(ctx, q, orgID, name)
	if err != nil {
		return BudgetUse{}, err
	}
	rules, err := activeRules(ctx, q, b.ID)
	if err != nil {
		return BudgetUse{}, err
	}
	whole, err := writePrompt(rules, 0)
	if err != nil {
		return BudgetUse{}, err
	}
	out := BudgetUse{Budget: int(b.BudgetTokens), Used: whole.tokens, Active: len(rules), Fit: len(rules)}
	if out.Over() {
		cut, err := writePrompt(rules, out.Budget)
		if err != nil {
			return BudgetUse{}, err
		}
		out.Fit = cut.rules
	}
	return out, nil
}

// SetBudget sets how many prompt tokens the codebook's rules may take.
func (s *Service) SetBudget(ctx context.Context, actor audit.Actor, orgID uuid.UUID, name string, budget int) error {
	if budget < 50 || budget > 200000 {
		return errs.InvalidField("budget_tokens", "must be from 50 to 200,000 tokens")
	}
	return db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		b, err := book(ctx, q, orgID, name)
		if err != nil {
			return err
		}
		if _, err := q.CodebookUpdateBudget(ctx, db.CodebookUpdateBudgetParams{OrgID: orgID, ID: b.ID, BudgetTokens: int32(budget)}); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "codebook.budget", TargetType: "codebook",
			TargetID: b.ID.String(), Details: map[string]any{"name": name, "budget_tokens": budget}})
	})
}

// Change is a rule whose section or text differs between two versions.
type Change struct {
	Before, After VersionRule
}

// Diff is what a published version changed from the one before it.
type Diff struct {
	Version, Previous int
	ContentHash       string
	Added, Removed    []VersionRule
	Changed           []Change
	Kept              int
}

// Diff compares a published version with the one before it, rule by rule
// (a rule keeps its id across versions; its section or text may change).
func (s *Service) Diff(ctx context.Context, orgID uuid.UUID, name string, version int) (Diff, error) {
	q := db.New(s.Pool)
	b, err := book(ctx, q, orgID, name)
	if err != nil {
		return Diff{}, err
	}
	v, err := q.CodebookVersionGet(ctx, db.CodebookVersionGetParams{CodebookID: b.ID, Version: int32(version)})
	if err != nil {
		return Diff{}, errs.NotFound(err)
	}
	after, err := versionRules(ctx, q, v.ID)
	if err != nil {
		return Diff{}, err
	}
	out := Diff{Version: version, Previous: version - 1, ContentHash: v.ContentHash}
	var before []VersionRule
	if version > 1 {
		prev, err := q.CodebookVersionGet(ctx, db.CodebookVersionGetParams{CodebookID: b.ID, Version: int32(version - 1)})
		if err != nil {
			return Diff{}, err
		}
		if before, err = versionRules(ctx, q, prev.ID); err != nil {
			return Diff{}, err
		}
	}
	was := map[uuid.UUID]VersionRule{}
	for _, r := range before {
		was[r.ID] = r
	}
	for _, r := range after {
		old, ok := was[r.ID]
		switch {
		case !ok:
			out.Added = append(out.Added, r)
		case old.Section != r.Section || old.Content != r.Content:
			out.Changed = append(out.Changed, Change{Before: old, After: r})
		default:
			out.Kept++
		}
		delete(was, r.ID)
	}
	for _, r := range before {
		if _, gone := was[r.ID]; gone {
			out.Removed = append(out.Removed, r)
		}
	}
	return out, nil
}

func versionRules(ctx context.Context, q *db.Queries, versionID uuid.UUID) ([]VersionRule, error) {
	rows, err := q.CodebookVersionRuleListPlain(ctx, versionID)
	if err != nil {
		return nil, err
	}
	out := make([]VersionRule, len(rows))
	for i, r := range rows {
		out[i] = VersionRule{ID: r.RuleID, Section: r.Section, Content: r.Content}
	}
	return out, nil
}

// RuleDetail is a rule with the items it came from and its recent uses.
type RuleDetail struct {
	Rule
	Sources []db.Feedback
	Uses    []db.CodebookRuleUseListRow
}

// Rule reads one rule with its sources and the feedback that reported
// using it, newest first.
func (s *Service) Rule(ctx context.Context, orgID uuid.UUID, name string, id uuid.UUID) (RuleDetail, error) {
	q := db.New(s.Pool)
	b, err := book(ctx, q, orgID, name)
	if err != nil {
		return RuleDetail{}, err
	}
	r, err := q.CodebookRuleGet(ctx, db.CodebookRuleGetParams{OrgID: orgID, CodebookID: b.ID, ID: id})
	if err != nil {
		return RuleDetail{}, errs.NotFound(err)
	}
	out := RuleDetail{Rule: ruleOf(r)}
	if len(r.SourceFeedbackIds) > 0 {
		if out.Sources, err = q.FeedbackListByIDs(ctx, db.FeedbackListByIDsParams{OrgID: orgID, Ids: r.SourceFeedbackIds}); err != nil {
			return RuleDetail{}, err
		}
	}
	out.Uses, err = q.CodebookRuleUseList(ctx, db.CodebookRuleUseListParams{OrgID: orgID, RuleID: id})
	return out, err
}
