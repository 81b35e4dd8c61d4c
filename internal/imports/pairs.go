package imports

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/importfile"
	"github.com/curate/curate/internal/pairs"
)

// readPairs reads a pair file of the given kind, checks every pair (see
// pairs.ImportPair.Check), counts the skipped ones in sum with their lines
// and passes each good one to fn. A file that holds no pair at all, good
// or skipped, is refused: it is not the kind it was said to be.
func readPairs(ctx context.Context, kind string, r io.Reader, sum *Summary, fn func(pairs.ImportPair) error) error {
	good := 0
	take := func(p importfile.Pair) error {
		ip := importPair(p)
		reason, err := ip.Check()
		if err != nil {
			return err
		}
		if reason != "" {
			sum.skipLine(importfile.Skip{Line: p.Line, Reason: reason})
			return nil
		}
		good++
		return fn(ip)
	}
	var rep importfile.Report
	var err error
	switch kind {
	case KindHHRLHF:
		rep, err = importfile.ReadHHRLHF(ctx, r, take)
	case KindOASSTPairs:
		rep, err = importfile.ReadOASST(ctx, r, func(t importfile.OASSTTree) error {
			for _, p := range t.Pairs {
				if err := take(p); err != nil {
					return err
				}
			}
			return nil
		})
	case KindTRL:
		rep, err = importfile.ReadTRLPreference(ctx, r, take)
	case KindOpenAIPreference:
		rep, err = importfile.ReadOpenAIPreference(ctx, r, take)
	default:
		return fmt.Errorf("%q is not a pair kind", kind)
	}
	if err != nil {
		return err
	}
	for _, sk := range rep.Skipped {
		sum.skipLine(sk)
	}
	slices.SortStableFunc(sum.Skips, func(a, b importfile.Skip) int { return a.Line - b.Line })
	if good == 0 && sum.Skipped == 0 {
		return errs.InvalidField("file", "holds no %s pairs", kind)
	}
	return nil
}

// importPair maps a pair as read to the shape pairs stores.
func importPair(p importfile.Pair) pairs.ImportPair {
	prompt := make([]pairs.Message, len(p.Prompt))
	for i, m := range p.Prompt {
		prompt[i] = pairs.Message{Role: m.Role, Content: m.Content}
	}
	strength := p.Strength
	return pairs.ImportPair{
		Input:              pairs.Input{Prompt: prompt, SystemPrompt: p.System, Chosen: p.Chosen, Rejected: p.Rejected, Strength: &strength},
		ExternalID:         p.ExternalID,
		ChosenExternalID:   p.ChosenExternalID,
		RejectedExternalID: p.RejectedExternalID,
	}
}

// pairStore returns the store step of one pair import: it stores each
// batch in the run's transaction, annotated by whoever started the run,
// and collects the ids of the file's pairs, each once.
func (s *Service) pairStore() func(context.Context, pgx.Tx, db.ImportRun, []pairs.ImportPair, *Summary) error {
	seen := map[uuid.UUID]bool{}
	return func(ctx context.Context, tx pgx.Tx, run db.ImportRun, batch []pairs.ImportPair, sum *Summary) error {
		created, ids, err := s.Pairs.ImportBatchTx(ctx, tx, run.OrgID, run.CreatedBy, batch)
		if err != nil {
			return err
		}
		sum.Stored += created
		sum.Duplicates += len(batch) - created
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				sum.PairIDs = append(sum.PairIDs, id)
			}
		}
		return nil
	}
}
