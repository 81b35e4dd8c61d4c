package pairs

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/importfile"
)

// ImportKinds are the files Import reads.
var ImportKinds = []string{"hh-rlhf", "oasst-pairs", "trl", "openai-preference"}

// importBatch is how many pairs go to the database per statement.
const importBatch = 1000

// ImportReport says what an import read and stored.
type ImportReport struct {
	Kind       string            `json:"kind"`
	Read       int               `json:"read"`       // pairs read from the file
	Created    int               `json:"created"`    // stored
	Duplicates int               `json:"duplicates"` // already stored (or repeated in the file)
	Skipped    []importfile.Skip `json:"skipped"`    // read but not importable, with the reason
	// PairIDs are the stored pairs the file's pairs are, whether this import
	// stored them or found them already there, each once, so that a caller
	// can put the file's pairs into a dataset.
	PairIDs []uuid.UUID `json:"-"`
}

// Import reads a file of pairs of the given kind (plain or gzip) and stores
// them with method "import", all in one transaction: a file that is not
// the format it claims fails at its first bad line, naming it, and stores
// nothing. Pairs with an empty or repeated reply are skipped and reported.
// A Git LFS pointer or broken gzip data is refused with an error that says
// so. OASST pairs link to their feedback items where those were imported.
func (s *Service) Import(ctx context.Context, actor audit.Actor, orgID uuid.UUID, kind string, r io.Reader) (ImportReport, error) {
	rep := ImportReport{Kind: kind, Skipped: []importfile.Skip{}}
	if !oneOf(kind, ImportKinds) {
		return rep, errs.InvalidField("kind", "must be one of %s", strings.Join(ImportKinds, ", "))
	}
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		var batch db.PairInsertManyParams
		seen := map[uuid.UUID]bool{}
		flush := func() error {
			if len(batch.Chosen) == 0 {
				return nil
			}
			batch.OrgID, batch.Method, batch.AnnotatorID, batch.Tags = orgID, db.PairMethodImport, actorUser(actor), []string{}
			n, err := q.PairInsertMany(ctx, batch)
			if err != nil {
				return err
			}
			rep.Created += int(n)
			rep.Duplicates += len(batch.Chosen) - int(n)
			ids, err := q.PairIDsByIdentity(ctx, db.PairIDsByIdentityParams{OrgID: orgID,
				ContentHashes: batch.ContentHashes, ExternalIds: batch.ExternalIds})
			if err != nil {
				return err
			}
			for _, id := range ids {
				if !seen[id] {
					seen[id] = true
					rep.PairIDs = append(rep.PairIDs, id)
				}
			}
			batch = db.PairInsertManyParams{}
			return nil
		}
		take := func(line int, system string, prompt []Message, chosen, rejected string, strength float64, ext, chosenExt, rejectedExt string) error {
			rep.Read++
			in := Input{Prompt: prompt, SystemPrompt: system, Chosen: chosen, Rejected: rejected, Strength: &strength}
			v := &errs.Invalid{}
			in.Validate(v, "")
			if v.Has() {
				if reason, ok := skippable(v); ok {
					rep.Skipped = append(rep.Skipped, importfile.Skip{Line: line, Reason: reason})
					return nil
				}
				return fmt.Errorf("line %d: %w", line, v)
			}
			add(&batch, in, strength, "", "", chosenExt, rejectedExt, ext)
			if len(batch.Chosen) >= importBatch {
				return flush()
			}
			return nil
		}
		var err error
		switch kind {
		case "hh-rlhf":
			var r2 importfile.Report
			r2, err = importfile.ReadHHRLHF(ctx, r, func(p importfile.Pair) error {
				return take(p.Line, "", toMessages(p.Prompt), p.Chosen, p.Rejected, p.Strength, p.ExternalID, "", "")
			})
			rep.Skipped = append(r2.Skipped, rep.Skipped...)
		case "oasst-pairs":
			var r2 importfile.Report
			r2, err = importfile.ReadOASST(ctx, r, func(t importfile.OASSTTree) error {
				for _, p := range t.Pairs {
					if err := take(p.Line, "", toMessages(p.Prompt), p.Chosen, p.Rejected, p.Strength, p.ExternalID,
						p.ChosenExternalID, p.RejectedExternalID); err != nil {
						return err
					}
				}
				return nil
			})
			rep.Skipped = append(r2.Skipped, rep.Skipped...)
		default:
			format := export.TRLPreference
			if kind == "openai-preference" {
				format = export.OpenAIPreference
			}
			var in io.Reader
			if in, err = plainInput(r); err == nil {
				err = export.ReadPref(ctx, format, in, func(line int, ex export.PrefExample) error {
					return take(line, ex.System, ex.Prompt, ex.Chosen, ex.Rejected, 1, "", "", "")
				})
			}
		}
		if err != nil {
			return err
		}
		if rep.Read == 0 && len(rep.Skipped) == 0 {
			return fmt.Errorf("the file holds no %s pairs", kind)
		}
		if err := flush(); err != nil {
			return err
		}
		return audit.Record(ctx, q, actor, audit.Entry{OrgID: orgID, Action: "pair.import", TargetType: "preference_pair",
			Details: map[string]any{"kind": kind, "read": rep.Read, "created": rep.Created, "duplicates": rep.Duplicates,
				"skipped": len(rep.Skipped)}})
	})
	if err != nil {
		return ImportReport{Kind: kind, Skipped: []importfile.Skip{}}, err
	}
	return rep, nil
}

// skippable tells a pair that is well-formed but cannot be a pair (an empty
// reply, or two equal replies) from a malformed one.
func skippable(v *errs.Invalid) (string, bool) {
	for _, e := range v.Errors {
		empty := e.Message == "is required" && (e.Field == "chosen_response" || e.Field == "rejected_response")
		same := e.Field == "rejected_response" && strings.HasPrefix(e.Message, "is the same text")
		if !empty && !same {
			return "", false
		}
	}
	f := v.Errors[0]
	if f.Message == "is required" {
		return "empty " + strings.TrimSuffix(f.Field, "_response") + " reply", true
	}
	return "chosen and rejected replies are the same text", true
}

func toMessages(in []importfile.Message) []Message {
	out := make([]Message, len(in))
	for i, m := range in {
		out[i] = Message{Role: m.Role, Content: m.Content}
	}
	return out
}

// plainInput undoes gzip compression and refuses a Git LFS pointer, as the
// imports package's readers do for their formats.
func plainInput(r io.Reader) (io.Reader, error) {
	const lfs = "version https://git-lfs.github.com/spec/v1"
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(len(lfs))
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", importfile.ErrGzip, err)
		}
		return gzipErrors{zr}, nil
	case string(head) == lfs:
		return nil, fmt.Errorf("%w: fetch the real file (git lfs pull) and import that", importfile.ErrLFSPointer)
	}
	return br, nil
}

// gzipErrors names gzip failures met while reading as such.
type gzipErrors struct{ r io.Reader }

func (g gzipErrors) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if err != nil && err != io.EOF {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("compressed data ends early (file truncated?)")
		}
		err = fmt.Errorf("%w: %v", importfile.ErrGzip, err)
	}
	return n, err
}
