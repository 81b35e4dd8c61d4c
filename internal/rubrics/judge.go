package rubrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/judge"
)

// MaxJudged is how many items one request asks the judge about: each is
// a call to the judge endpoint, made while the request waits.
const MaxJudged = 50

// JudgeKeyPrefix begins the reviewer key of a judge endpoint's answers:
// stored as a rater's, they join the per-question agreement beside the
// human reviewers', which is then judge-versus-human agreement.
const JudgeKeyPrefix = "judge:"

// Judged is what asking the judge a rubric's questions did.
type Judged struct {
	Answered int      `json:"answered"`
	Invalid  []string `json:"invalid,omitempty"` // one reason per item not answered usably
	Calls    int      `json:"calls"`
	Cost     int64    `json:"cost_micros"`
}

// judgeable are the questions a judge is asked: the label and rating
// questions, each of which it must answer.
func (r Rubric) judgeable() Rubric {
	out := r
	out.Questions = nil
	for _, q := range r.Questions {
		if q.Kind == KindLabel || q.Kind == KindRating {
			q.Required = true
			out.Questions = append(out.Questions, q)
		}
	}
	return out
}

// JudgePrompt is what the judge is asked about one item: the guidelines,
// the item, and each label and rating question with its answers, to be
// answered with one JSON object by question key.
func (r Rubric) JudgePrompt(query, response string) string {
	var b strings.Builder
	b.WriteString("You review an assistant's answer with a rubric.\n")
	if g := strings.TrimSpace(r.Guidelines); g != "" {
		b.WriteString("\nGuidelines:\n" + g + "\n")
	}
	b.WriteString("\nQuestion asked of the assistant:\n" + query + "\n\nThe assistant's answer:\n" + response + "\n\nAnswer each question:\n")
	for _, q := range r.judgeable().Questions {
		fmt.Fprintf(&b, "- %q: %s", q.Key, q.Title)
		if q.Description != "" {
			b.WriteString(" (" + q.Description + ")")
		}
		if q.Kind == KindLabel {
			quoted := make([]string, len(q.Options))
			for i, o := range q.Options {
				quoted[i] = fmt.Sprintf("%q", o)
			}
			b.WriteString(". One of " + strings.Join(quoted, ", ") + ".\n")
		} else {
			lo, hi := q.Bounds()
			fmt.Fprintf(&b, ". A whole number from %d to %d", lo, hi)
			if len(q.Options) > 0 {
				b.WriteString(": " + strings.Join(q.Options, ", ") + " in that order")
			}
			b.WriteString(".\n")
		}
	}
	b.WriteString("\nReply with one JSON object whose keys are the question keys and whose values are your answers, and nothing else.")
	return b.String()
}

// AskJudge asks a judge endpoint a rubric's label and rating questions
// about each item, within the organisation's judge budget, and stores its
// usable answers as a rater's (reviewer key "judge:<endpoint>"), replacing
// its earlier ones. An answer that does not parse, or does not answer
// every asked question with one of its answers, is reported and stored
// for no item.
func (s *Service) AskJudge(ctx context.Context, actor audit.Actor, orgID, rubricID uuid.UUID, endpoint string, ids []uuid.UUID) (Judged, error) {
	var out Judged
	j := s.Judge
	if j == nil {
		return out, &errs.Unavailable{Message: "no judge is configured"}
	}
	// The rubric is the request's address: another organisation's is not
	// found, whatever the body says.
	r, err := s.Get(ctx, orgID, rubricID)
	if err != nil {
		return out, err
	}
	switch {
	case len(ids) == 0:
		return out, errs.InvalidField("feedback_ids", "name at least one item")
	case len(ids) > MaxJudged:
		return out, errs.InvalidField("feedback_ids", "at most %d items per request, not %d", MaxJudged, len(ids))
	case strings.TrimSpace(endpoint) == "":
		return out, errs.InvalidField("endpoint", "is required: the name of a judge endpoint")
	}
	asked := r.judgeable()
	if len(asked.Questions) == 0 {
		return out, errs.InvalidField("rubric_id", "%s has no label or rating question for the judge to answer", r.Name)
	}
	ep, client, err := j.Endpoints.Client(ctx, orgID, endpoint)
	if err != nil {
		return out, errs.InvalidField("endpoint", "%s", judge.Describe(err))
	}
	q := db.New(s.Pool)
	// Every item is read before the judge is asked about any: an unknown
	// one refuses the request, spending nothing.
	items := make([]db.FeedbackGetRow, len(ids))
	for i, id := range ids {
		f, err := q.FeedbackGet(ctx, db.FeedbackGetParams{OrgID: orgID, ID: id})
		if errors.Is(err, pgx.ErrNoRows) {
			return out, errs.InvalidField(fmt.Sprintf("feedback_ids[%d]", i), "no feedback item %s in this organisation", id)
		}
		if err != nil {
			return out, err
		}
		items[i] = f
	}
	tpl := judge.Template{Name: "rubric:" + r.Name, Version: r.Version}
	for i, id := range ids {
		f := items[i]
		var vals Values
		res, err := j.Ask(ctx, orgID, judge.Ask{Endpoint: ep, Client: client, Template: tpl, Prompt: r.JudgePrompt(f.Feedback.Query, f.Feedback.Response),
			Purpose: "rubric " + r.ID.String()[:8], What: "judge", Parse: func(content string) error {
				var raw map[string]json.RawMessage
				if err := json.Unmarshal([]byte(content), &raw); err != nil {
					return fmt.Errorf("not a JSON object of answers")
				}
				var cerr error
				if vals, cerr = asked.Check(raw, f.Feedback.Response); cerr != nil {
					return cerr
				}
				return nil
			}})
		out.Calls += res.Calls
		out.Cost += int64(res.Cost)
		if err != nil {
			return out, err
		}
		if res.Invalid != "" {
			out.Invalid = append(out.Invalid, id.String()+": "+res.Invalid)
			continue
		}
		body, err := json.Marshal(vals)
		if err != nil {
			return out, err
		}
		err = db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
			_, err := q.RubricAnswerInsertOrUpdate(ctx, db.RubricAnswerInsertOrUpdateParams{OrgID: orgID, FeedbackID: id, RubricID: r.ID,
				RubricVersion: int32(r.Version), ReviewerKey: JudgeKeyPrefix + ep.Name, ReviewerLabel: "Judge " + ep.Name, Answers: body})
			if err != nil {
				return err
			}
			return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "rubric.judge", TargetType: "feedback",
				TargetID: id.String(), Details: map[string]any{"rubric_id": r.ID, "version": r.Version, "endpoint": ep.Name}})
		})
		if err != nil {
			return out, err
		}
		out.Answered++
	}
	return out, nil
}
