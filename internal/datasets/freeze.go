package datasets

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
)

// readPage is how many rows one keyset read fetches: enough to amortise
// the round trip, few enough that memory stays flat.
const readPage = 1000

// Freeze marks a curating dataset ready by freezing a version: the
// members' exported fields are copied into the version's items with their
// split, and the version gets a content hash and counts. When the content
// and split equal the latest version's, that version is reused instead of
// making an identical one. Freezing a dataset that is already ready or
// exported returns its current version.
func (s *Service) Freeze(ctx context.Context, actor audit.Actor, orgID, id uuid.UUID) (db.DatasetVersion, error) {
	var out db.DatasetVersion
	err := db.InTx(ctx, s.Pool, func(tx pgx.Tx, q *db.Queries) error {
		d, err := lock(ctx, q, orgID, id)
		if err != nil {
			return err
		}
		if (d.Status == StatusReady || d.Status == StatusExported) && d.CurrentVersionID.Valid {
			out, err = q.DatasetVersionGet(ctx, db.DatasetVersionGetParams{OrgID: orgID, ID: d.CurrentVersionID.UUID})
			return err
		}
		if err := checkTransition(string(d.Status), StatusReady); err != nil {
			return err
		}
		// Members are read on other connections while the transaction
		// copies the ones read before: the dataset's lock keeps them still.
		frozen, err := freezeItems(ctx, tx, db.New(s.Pool), d, actor.Label)
		if err != nil {
			return err
		}
		out = frozen.version
		if !frozen.reused && s.Jobs != nil {
			// The report in the dataset's format is computed once, now, in
			// the background: the first export finds it ready.
			if _, err := s.Jobs.InsertTx(ctx, tx, ReportArgs{VersionID: out.ID}, nil); err != nil {
				return err
			}
		}
		// The quality score belongs to the old content: the next export in
		// the target format records the new one.
		p := db.DatasetUpdateCurrentVersionParams{OrgID: orgID, ID: id, VersionID: uuid.NullUUID{UUID: out.ID, Valid: true}}
		if _, err := q.DatasetUpdateCurrentVersion(ctx, p); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "dataset.freeze", TargetType: "dataset",
			TargetID: id.String(), Details: map[string]any{"version": out.Number, "content_hash": out.ContentHash,
				"items": out.ItemCount, "reused": frozen.reused}})
	})
	return out, err
}

type frozenVersion struct {
	version db.DatasetVersion
	reused  bool
}

// freezeItems copies the members into a new version inside tx. Items are
// read a page at a time on read's connections and streamed with one COPY
// into the transaction's stage, so memory holds only the split keys, one
// 32-byte hash per item and a few pages; once the version is known to be
// new, the stage is written into its items in key order.
func freezeItems(ctx context.Context, tx pgx.Tx, read *db.Queries, d db.TrainingDataset, by string) (frozenVersion, error) {
	q := db.New(tx)
	kind := KindOf(string(d.DatasetType))
	cfg := SplitConfig{Strategy: string(d.SplitStrategy), ValidationPercent: int(d.ValidationPercent), Seed: d.SplitSeed}

	items, err := splitItems(ctx, q, d)
	if err != nil {
		return frozenVersion{}, err
	}
	if len(items) == 0 {
		return frozenVersion{}, errs.InvalidField("members", "the dataset has no examples: add %s before marking it ready", memberNoun(kind))
	}
	skip, leftOut, err := unsettled(ctx, q, d)
	if err != nil {
		return frozenVersion{}, err
	}
	if len(skip) > 0 {
		items = slices.DeleteFunc(items, func(it SplitItem) bool { return skip[it.ID] })
	}
	if len(items) == 0 {
		return frozenVersion{}, errs.InvalidField("members", "every member is left out: the dataset takes agreed items only, and %d are disputed and %d await reviews; "+
			"decide the disputes in adjudication or let the reviews finish", leftOut.Disputed, leftOut.Open)
	}
	inValidation := Split(items, cfg)
	splitOf := make(map[uuid.UUID]string, len(items))
	for i, it := range items {
		splitOf[it.ID] = splitName(inValidation[i])
	}

	// A savepoint, so an identical version's items can be dropped again.
	sp, err := tx.Begin(ctx)
	if err != nil {
		return frozenVersion{}, err
	}
	defer sp.Rollback(ctx) //nolint:errcheck // after Commit this is a no-op
	spq := db.New(sp)
	if err := spq.DatasetVersionItemStageInsertTable(ctx); err != nil {
		return frozenVersion{}, err
	}
	versionID := uuid.New()
	hashed := make([]hashedItem, 0, len(items))
	train := 0
	// Members are read, encoded and hashed on one goroutine while the
	// stage's one COPY stores what the last ones gave on another.
	staged := make(chan db.DatasetVersionItemStageInsertManyParams, readPage)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(staged)
		return eachMember(gctx, read, d, false, func(source uuid.UUID, e Example) error {
			if skip[source] {
				return nil
			}
			canon, err := e.Canonical()
			if err != nil {
				return err
			}
			sum := sha256.Sum256(canon)
			split := splitOf[source]
			if split == "train" {
				train++
			}
			hashed = append(hashed, hashedItem{sha: sum, split: split})
			select {
			case staged <- db.DatasetVersionItemStageInsertManyParams{ContentSha: sum[:], SourceID: source, Split: split, Content: canon}:
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		})
	})
	g.Go(func() error {
		_, err := spq.DatasetVersionItemStageCopy(gctx, staged)
		return err
	})
	if err := g.Wait(); err != nil {
		return frozenVersion{}, err
	}
	if len(hashed) != len(items) {
		// A member was deleted between the two reads; the lock on the
		// dataset makes this rare, and a retry sees a consistent set.
		return frozenVersion{}, &errs.Conflict{Message: "the dataset's members changed while it was being frozen; try again"}
	}
	hash := versionHash(kind, cfg, hashed)

	latest, err := spq.DatasetVersionGetLatest(ctx, d.ID)
	switch {
	case err == nil && latest.ContentHash == hash && latest.Kind == kind &&
		latest.LeftOutDisputed == int32(leftOut.Disputed) && latest.LeftOutOpen == int32(leftOut.Open):
		if err := sp.Rollback(ctx); err != nil {
			return frozenVersion{}, err
		}
		return frozenVersion{version: latest, reused: true}, nil
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return frozenVersion{}, err
	}
	if _, err := spq.DatasetVersionItemInsertStaged(ctx, versionID); err != nil {
		return frozenVersion{}, err
	}
	ver, err := spq.DatasetVersionInsert(ctx, db.DatasetVersionInsertParams{
		ID: versionID, OrgID: d.OrgID, DatasetID: d.ID, Kind: kind, ContentHash: hash,
		ItemCount: int32(len(hashed)), TrainCount: int32(train), ValidationCount: int32(len(hashed) - train),
		SplitStrategy: d.SplitStrategy, ValidationPercent: d.ValidationPercent, SplitSeed: d.SplitSeed,
		CreatedByLabel: by, LeftOutDisputed: int32(leftOut.Disputed), LeftOutOpen: int32(leftOut.Open),
	})
	if err != nil {
		return frozenVersion{}, err
	}
	if err := sp.Commit(ctx); err != nil {
		return frozenVersion{}, err
	}
	return frozenVersion{version: ver}, nil
}

// splitItems reads what the split needs of every member of d.
func splitItems(ctx context.Context, q *db.Queries, d db.TrainingDataset) ([]SplitItem, error) {
	rows, err := q.DatasetMemberListSplitKeys(ctx, d.ID)
	items := make([]SplitItem, len(rows))
	for i, r := range rows {
		items[i] = SplitItem{ID: r.ID, Stratum: r.Stratum, User: r.EndUser, Created: r.CreatedAt}
	}
	return items, err
}

func splitName(validation bool) string {
	if validation {
		return "validation"
	}
	return "train"
}

func memberNoun(kind string) string {
	if kind == KindPreference {
		return "preference pairs"
	}
	return "approved or corrected feedback"
}

// member is one member's example, or the error reading it.
type member struct {
	source uuid.UUID
	ex     Example
}

// eachMember calls fn with every member's example, in id order when
// byID is set. Members are read by a goroutine on read's own connections,
// a page or two ahead, while fn works on the page before: fn may use
// another connection (the freeze's transaction, to COPY) at the same time.
// A freeze needs no order (it sorts what it stores), and pairs in no order
// come in one stream, twice as fast at a million as pages by id.
func eachMember(ctx context.Context, read *db.Queries, d db.TrainingDataset, byID bool, fn func(source uuid.UUID, e Example) error) error {
	pages := make(chan []member, 2)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(pages)
		send := func(p []member) error {
			select {
			case pages <- p:
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		switch {
		case KindOf(string(d.DatasetType)) != KindPreference:
			return eachFeedbackPage(gctx, read, d, send)
		case byID:
			return eachPairPageByID(gctx, read, d, send)
		default:
			return eachPairPage(gctx, read, d, send)
		}
	})
	g.Go(func() error {
		for page := range pages {
			for _, m := range page {
				if err := fn(m.source, m.ex); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return g.Wait()
}

// eachPairPage reads the pair members in one stream and sends them a page
// at a time.
func eachPairPage(ctx context.Context, read *db.Queries, d db.TrainingDataset, send func([]member) error) error {
	page := make([]member, 0, memberPage)
	err := read.DatasetMemberEachPairContent(ctx, d.ID, func(r db.DatasetMemberListPairContentsAllRow) error {
		e, err := pairExample(r.Prompt, r.SystemPrompt, r.ChosenResponse, r.RejectedResponse, d.SystemPrompt)
		if err != nil {
			return fmt.Errorf("pair %s: %w", r.ID, err)
		}
		page = append(page, member{r.ID, e})
		if len(page) < memberPage {
			return nil
		}
		err = send(page)
		page = make([]member, 0, memberPage)
		return err
	})
	if err != nil || len(page) == 0 {
		return err
	}
	return send(page)
}

// eachPairPageByID reads the pair members a keyset page at a time, by id.
func eachPairPageByID(ctx context.Context, read *db.Queries, d db.TrainingDataset, send func([]member) error) error {
	return eachPageByID(send, func(after uuid.UUID) ([]member, error) {
		rows, err := read.DatasetMemberListPairContents(ctx, db.DatasetMemberListPairContentsParams{DatasetID: d.ID, After: after, RowLimit: memberPage})
		if err != nil {
			return nil, err
		}
		page := make([]member, 0, len(rows))
		for _, r := range rows {
			e, err := pairExample(r.Prompt, r.SystemPrompt, r.ChosenResponse, r.RejectedResponse, d.SystemPrompt)
			if err != nil {
				return nil, fmt.Errorf("pair %s: %w", r.ID, err)
			}
			page = append(page, member{r.ID, e})
		}
		return page, nil
	})
}

// eachFeedbackPage reads the feedback members a keyset page at a time, with
// their settled rubric answers.
func eachFeedbackPage(ctx context.Context, read *db.Queries, d db.TrainingDataset, send func([]member) error) error {
	return eachPageByID(send, func(after uuid.UUID) ([]member, error) {
		rows, err := read.DatasetMemberListFeedbackContents(ctx, db.DatasetMemberListFeedbackContentsParams{DatasetID: d.ID, After: after, RowLimit: memberPage})
		if err != nil {
			return nil, err
		}
		ids := make([]uuid.UUID, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		answers, err := settledAnswers(ctx, read, d.OrgID, ids)
		if err != nil {
			return nil, err
		}
		page := make([]member, 0, len(rows))
		for _, r := range rows {
			e, err := feedbackExample(r.Query, r.Response, r.Correction, string(r.Status), r.Context, d.SystemPrompt)
			if err != nil {
				return nil, fmt.Errorf("feedback %s: %w", r.ID, err)
			}
			e.RubricAnswers = answers[r.ID]
			page = append(page, member{r.ID, e})
		}
		return page, nil
	})
}

// eachPageByID sends the pages read gives, each read after the last id of
// the one before, until one comes back short of memberPage.
func eachPageByID(send func([]member) error, read func(after uuid.UUID) ([]member, error)) error {
	after := uuid.Nil
	for {
		page, err := read(after)
		if err != nil {
			return err
		}
		if len(page) > 0 {
			if err := send(page); err != nil {
				return err
			}
			after = page[len(page)-1].source
		}
		if len(page) < memberPage {
			return nil
		}
	}
}

// memberPage is how many members a page of eachMember holds.
const memberPage = 2000
