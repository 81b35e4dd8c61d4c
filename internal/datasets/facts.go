package datasets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/pii"
	"github.com/curate/curate/internal/validate"
)

// A report adds every example's facts (validate.Facts: what checking the
// example alone finds) to a validator, which then runs the checks across
// examples. Facts are stored by content hash and profile (item_facts), so
// each example is checked once per profile: a second report, an export's
// preflight, a report in another base model with the same tokenizer, the
// next freeze of mostly the same members and each report on a draft only
// check the examples they have not seen.

// checker checks examples as an export writes them: with PII masked, or
// with PII reported.
type checker struct {
	v       *validate.Validator
	kind    string
	mask    bool
	profile string
}

func newChecker(f export.Format, baseModel, kind string, maskPII bool) (*checker, error) {
	opts := validate.Options{Format: f, BaseModel: baseModel}
	if !maskPII {
		opts.PIIDetector = pii.Kinds
	}
	v, err := validate.New(opts)
	if err != nil {
		return nil, err
	}
	profile := v.Profile() + "/unmasked"
	if maskPII {
		profile = v.Profile() + "/masked"
	}
	return &checker{v: v, kind: kind, mask: maskPII, profile: profile}, nil
}

// facts checks one example alone. It is safe for concurrent use.
func (c *checker) facts(e Example) validate.Facts {
	if c.mask {
		e = e.Masked()
	}
	if c.kind == KindPreference {
		return c.v.PrefFacts(e.Pref())
	}
	return c.v.SFTFacts(e.SFT())
}

// factItem is one example on its way to the validator: its stored facts,
// or what they are computed from.
type factItem struct {
	sha     []byte
	stored  []byte   // encoded facts, when stored
	content []byte   // canonical JSON, when facts are missing (frozen items)
	ex      *Example // the example, when facts are missing (draft members)
	facts   validate.Facts
	fresh   []byte // encoded facts computed now, to store
}

// factsBatch is how many examples are resolved together, in parallel.
const factsBatch = 256

// factStore resolves batches of items to facts, computing the missing ones
// on every core, and keeps what it computed until the caller flushes.
type factStore struct {
	q       *db.Queries
	orgID   uuid.UUID
	c       *checker
	shas    [][]byte
	encoded [][]byte
}

// factsRange is how many items a report streams from one query before it
// stores the facts it computed for them: about 35 MB held at most. Tests
// make it small.
var factsRange int32 = 100_000

// add fills in every item's facts, keeps the computed ones for flush, and
// adds them all to the checker's validator, in order.
func (s *factStore) add(items []factItem) error {
	if err := onCores(len(items), func(i int) error { return s.resolveOne(&items[i]) }); err != nil {
		return err
	}
	for i := range items {
		if items[i].fresh != nil {
			s.shas = append(s.shas, items[i].sha)
			s.encoded = append(s.encoded, items[i].fresh)
		}
		s.c.v.AddFacts(items[i].facts)
	}
	return nil
}

func (s *factStore) resolveOne(it *factItem) error {
	if it.stored != nil {
		return it.facts.UnmarshalBinary(it.stored)
	}
	ex := it.ex
	if ex == nil {
		ex = &Example{}
		if err := decodeExample(it.content, ex); err != nil {
			return fmt.Errorf("version item: %w", err)
		}
	}
	it.facts = s.c.facts(*ex)
	var err error
	it.fresh, err = it.facts.MarshalBinary()
	return err
}

// flush stores the facts computed since the last flush, a few thousand
// a statement.
func (s *factStore) flush(ctx context.Context) error {
	const perInsert = 4096
	for start := 0; start < len(s.shas); start += perInsert {
		end := min(start+perInsert, len(s.shas))
		err := s.q.ItemFactsInsertMany(ctx, db.ItemFactsInsertManyParams{OrgID: s.orgID, Profile: s.c.profile,
			ContentShas: s.shas[start:end], Facts: s.encoded[start:end]})
		if err != nil {
			return err
		}
	}
	s.shas, s.encoded = nil, nil
	return nil
}

// versionFacts adds the facts of every item of a frozen version to c's
// validator, in canonical order, and stores the facts it had to compute.
// Each split is streamed a range of factsRange items at a time, with
// their stored facts (the content only where there are none), while
// batches are resolved on every core; what was computed is stored once
// the range's stream is closed. A report thus holds one connection at a
// time: one holding its stream while it waited for another to store on
// could wait forever once reports and long jobs had taken the rest of a
// small pool.
func versionFacts(ctx context.Context, pool *pgxpool.Pool, ver db.DatasetVersion, c *checker) error {
	q := db.New(pool)
	store := &factStore{q: q, orgID: ver.OrgID, c: c}
	for _, split := range Splits {
		arg := db.DatasetVersionItemListFactsParams{OrgID: ver.OrgID, Profile: c.profile, VersionID: ver.ID, Split: split,
			AfterSha: []byte{}, RowLimit: factsRange}
		for {
			n, err := streamFacts(ctx, q, &arg, store)
			if err != nil {
				return err
			}
			if err := store.flush(ctx); err != nil {
				return err
			}
			if n < int(factsRange) {
				break
			}
		}
	}
	return nil
}

// streamFacts streams one range of items from arg's key on, adding their
// facts to the store's validator, and moves arg past the range. It
// answers how many items the range held.
func streamFacts(ctx context.Context, q *db.Queries, arg *db.DatasetVersionItemListFactsParams, store *factStore) (int, error) {
	n := 0
	from := *arg
	read := func(ctx context.Context, emit func(factItem) error) error {
		return q.DatasetVersionItemEachFacts(ctx, from, func(sha []byte, source uuid.UUID, facts, content []byte) error {
			it := factItem{sha: bytes.Clone(sha)}
			if facts != nil {
				it.stored = bytes.Clone(facts)
			} else {
				it.content = bytes.Clone(content)
			}
			n++
			arg.AfterSha, arg.AfterSource = it.sha, source
			return emit(it)
		})
	}
	err := inBatches(ctx, factsBatch, read, store.add)
	return n, err
}

// memberFacts adds the facts of every member of a dataset as it is now to
// c's validator, in id order: the stored facts of members whose content
// was checked before, by any report or freeze, and fresh ones for the rest.
// Members a dataset of agreed items only leaves out are skipped, and
// counted.
func memberFacts(ctx context.Context, q *db.Queries, d db.TrainingDataset, c *checker) (LeftOut, error) {
	skip, leftOut, err := unsettled(ctx, q, d)
	if err != nil {
		return leftOut, err
	}
	store := &factStore{q: q, orgID: d.OrgID, c: c}
	batch := make([]factItem, 0, factsBatch)
	run := func() error {
		shas := make([][]byte, len(batch))
		for i := range batch {
			shas[i] = batch[i].sha
		}
		rows, err := q.ItemFactsList(ctx, db.ItemFactsListParams{OrgID: d.OrgID, Profile: c.profile, ContentShas: shas})
		if err != nil {
			return err
		}
		stored := make(map[[sha256.Size]byte][]byte, len(rows))
		for _, r := range rows {
			stored[[sha256.Size]byte(r.ContentSha)] = r.Facts
		}
		for i := range batch {
			if f, ok := stored[[sha256.Size]byte(batch[i].sha)]; ok {
				batch[i].stored, batch[i].ex = f, nil
			}
		}
		if err := store.add(batch); err != nil {
			return err
		}
		batch = batch[:0]
		// Members are read on other connections: storing here holds none.
		return store.flush(ctx)
	}
	err = eachMember(ctx, q, d, true, func(source uuid.UUID, e Example) error {
		if skip[source] {
			return nil
		}
		canon, err := e.Canonical()
		if err != nil {
			return err
		}
		sum := sha256.Sum256(canon)
		batch = append(batch, factItem{sha: sum[:], ex: &e})
		if len(batch) == factsBatch {
			return run()
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		err = run()
	}
	return leftOut, err
}

// FactsKeep is how long stored facts are kept. They are a cache: a frozen
// version's report in its format is stored whole, so old facts are rarely
// read again, and a report computes whatever has gone.
const FactsKeep = 30 * 24 * time.Hour

// PruneFacts deletes the facts stored before the given time, a bounded
// batch per statement, and returns how many went.
func (s *Service) PruneFacts(ctx context.Context, before time.Time) (int64, error) {
	q := db.New(s.Pool)
	var total int64
	for {
		n, err := q.ItemFactsDeleteExpired(ctx, before)
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
}
