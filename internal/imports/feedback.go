package imports

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/importfile"
)

// feedbackReader reads the run's feedback file (KindJSONL, KindOASST,
// KindSeed001, KindSeed004), maps and checks every record (what a record
// names by reference too: a best-of-N answer, a curator, the
// organisation), counts skipped ones in sum and passes each item to fn.
// The run's starter decides what a record's is_training_data says.
func (s *Service) feedbackReader(run db.ImportRun) func(ctx context.Context, kind string, r io.Reader, sum *Summary, fn func(feedback.Item) error) error {
	return func(ctx context.Context, kind string, r io.Reader, sum *Summary, fn func(feedback.Item) error) error {
		switch kind {
		case KindJSONL, KindSeed001, KindSeed004:
			shape := map[string]string{KindJSONL: feedback.ShapeAny, KindSeed001: feedback.ShapeSeed001, KindSeed004: feedback.ShapeSeed004}[kind]
			check := s.Feedback.Checker(run.OrgID)
			return readJSONL(ctx, r, shape, func(it *feedback.Item) error {
				it.DecidedBy = run.CreatedByLabel
				return check(ctx, it)
			}, fn)
		case KindOASST:
			return readOASST(ctx, r, sum, fn)
		}
		return fmt.Errorf("%q is not a feedback kind", kind)
	}
}

// storeFeedback stores a batch of items from a file in the run's
// transaction; items already stored (by external id) are duplicates.
func (s *Service) storeFeedback(ctx context.Context, tx pgx.Tx, run db.ImportRun, batch []feedback.Item, sum *Summary) error {
	res, err := s.Feedback.IngestBatchTx(ctx, tx, run.OrgID, "file", batch)
	if err != nil {
		return err
	}
	sum.Stored += res.Inserted
	sum.Duplicates += res.Duplicates
	return nil
}

// readJSONL reads feedback items in the API's shape, Curate's names or a
// seed's (shape names which, or feedback.ShapeAny). An item without an
// external_id gets "jsonl:" and a digest of its content, so importing the
// same file again is recognised and stores nothing new.
func readJSONL(ctx context.Context, r io.Reader, shape string, check func(*feedback.Item) error, fn func(feedback.Item) error) error {
	return importfile.ReadJSONL(ctx, r, func(_ int, in feedback.Incoming) error {
		v := &errs.Invalid{}
		it := in.Map(v, "", shape)
		if v.Has() {
			return v
		}
		if err := check(&it); err != nil {
			return err
		}
		if it.ExternalID == "" {
			// The item as checked, and when it was given where it says.
			b, err := json.Marshal(struct {
				feedback.Item
				GivenAt *time.Time `json:"created_at,omitempty"`
			}{it, it.GivenAt})
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			it.ExternalID = "jsonl:" + hex.EncodeToString(sum[:16])
		}
		return fn(it)
	})
}

// readOASST turns every assistant reply of the trees into a feedback item.
func readOASST(ctx context.Context, r io.Reader, sum *Summary, fn func(feedback.Item) error) error {
	rep, err := importfile.ReadOASST(ctx, r, func(tree importfile.OASSTTree) error {
		for _, o := range tree.Items {
			it, err := oasstItem(o)
			if err != nil {
				return err
			}
			v := &errs.Invalid{}
			it.Validate(v, "message "+o.MessageID+": ")
			if v.Has() {
				return v
			}
			if err := fn(it); err != nil {
				return err
			}
		}
		return nil
	})
	for _, sk := range rep.Skipped {
		sum.skipLine(sk)
	}
	return err
}

// oasstItem maps one OASST assistant reply: the question is the prompt's
// last (user) turn, the earlier turns go to context.messages; the votes
// give the thumbs (a reply without a majority either way is "detailed":
// its rank is the judgement); the rank is kept with the parent message's id
// as the group, for turning ranks into pairs.
func oasstItem(o importfile.OASSTItem) (feedback.Item, error) {
	if len(o.Prompt) == 0 {
		return feedback.Item{}, fmt.Errorf("message %s: no prompt", o.MessageID)
	}
	last := o.Prompt[len(o.Prompt)-1]
	it := feedback.Item{
		ExternalID: o.ExternalID,
		SessionID:  o.TreeID,
		Query:      last.Content,
		Response:   o.Response,
		Model:      o.ModelName,
		Rank:       o.Rank,
		RankGroup:  o.ParentID,
		Tags:       []string{"oasst"},
	}
	switch o.Thumbs {
	case importfile.ThumbsUp:
		it.FeedbackType = "thumbs_up"
	case importfile.ThumbsDown:
		it.FeedbackType = "thumbs_down"
	default:
		it.FeedbackType = "detailed"
	}
	if o.Up+o.Down > 0 {
		it.Comment = fmt.Sprintf("OpenAssistant votes: %d up, %d down", o.Up, o.Down)
	}
	if o.Synthetic {
		it.Tags = append(it.Tags, "synthetic")
	}
	if len(o.Prompt) > 1 {
		b, err := json.Marshal(map[string]any{"messages": o.Prompt[:len(o.Prompt)-1]})
		if err != nil {
			return feedback.Item{}, err
		}
		it.Context = b
	}
	return it, nil
}
