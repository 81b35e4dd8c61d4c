// Package imports brings data into Curate from outside, all through one
// pipeline: files uploaded in the browser or given to the CLI (feedback in
// Curate's JSONL or as OpenAssistant trees; preference pairs from HH-RLHF,
// OpenAssistant ranked siblings, or TRL and OpenAI preference files;
// feedback records of the two seed systems, seed 001's and seed 004's), and an
// organisation's Langfuse project, synced periodically.
//
// Every file import is an import run (a row of import_runs whose kind,
// progress, counts and error the pages show). The file is read whole once
// to check every record, then again to store, inside one transaction: a
// file with one bad line stores nothing. Package importfile reads the
// formats; this package maps what it reads to feedback.Item or
// pairs.ImportPair and stores it through feedback.Service or pairs.Service.
// A Langfuse sync is all or nothing too.
//
// The service starts its own background work: an upload's run and its
// import job (ImportArgs), or a requested sync and its job
// (LangfuseSyncArgs), are written in one transaction. An upload waits in
// the blob store that every server shares (see UploadKey), so any worker
// can run its import; the CLI's file is read where it lies. The workers in
// package jobs call back into the service; handlers and the CLI call it
// directly. It knows nothing of HTTP.
package imports

import (
	"log/slog"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"gocloud.dev/blob"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/importfile"
	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/outbound"
	"github.com/curate/curate/internal/pairs"
	"github.com/curate/curate/internal/secrets"
)

// File kinds: what a file holds, and so what its import stores.
const (
	KindJSONL            = "jsonl"             // feedback items, the API's item shape, one per line
	KindOASST            = "oasst"             // OpenAssistant message trees: every assistant reply as feedback
	KindSeed001          = "seed001"           // seed 001's feedback_data records, one per line, with their timestamps
	KindSeed004          = "seed004"           // seed 004's rlhf_feedback rows, one per line, with their created_at
	KindHHRLHF           = "hh-rlhf"           // Anthropic HH-RLHF chosen/rejected transcripts: pairs
	KindOASSTPairs       = "oasst-pairs"       // OpenAssistant message trees: ranked siblings as pairs
	KindTRL              = "trl"               // TRL preference lines (Curate's trl_preference export): pairs
	KindOpenAIPreference = "openai-preference" // OpenAI DPO lines (Curate's openai_preference export): pairs
)

var (
	// FeedbackKinds are the kinds whose import stores feedback items.
	FeedbackKinds = []string{KindJSONL, KindOASST, KindSeed001, KindSeed004}
	// PairKinds are the kinds whose import stores preference pairs.
	PairKinds = []string{KindHHRLHF, KindOASSTPairs, KindTRL, KindOpenAIPreference}
	// Kinds lists every kind, for forms and flags.
	Kinds = slices.Concat(FeedbackKinds, PairKinds)
)

// IsPairKind reports whether a file of this kind holds preference pairs.
func IsPairKind(kind string) bool { return slices.Contains(PairKinds, kind) }

// Service runs imports for one database.
type Service struct {
	Pool     *pgxpool.Pool
	Q        *db.Queries
	Feedback *feedback.Service
	Pairs    *pairs.Service
	// Jobs queues the import and sync jobs, in the transaction that
	// records what they will work on.
	Jobs    jobq.Inserter
	Secrets *secrets.Box
	// Bucket keeps uploaded files (under UploadKey) until their run ends:
	// the blob store every server shares, so the worker that runs an
	// import need not be the server that took the upload.
	Bucket *blob.Bucket
	// Outbound makes every call to an organisation's Langfuse, under the
	// operator's address policy; nil allows public addresses only.
	Outbound *outbound.Client
	Log      *slog.Logger
}

// New builds the service on the process's feedback and pair services: jobs
// starts imports and syncs, uploads wait in bucket, secrets seals the
// Langfuse secret keys, and out makes every call to a Langfuse host.
func New(pool *pgxpool.Pool, fb *feedback.Service, ps *pairs.Service, jobs jobq.Inserter, secrets *secrets.Box, bucket *blob.Bucket,
	out *outbound.Client, log *slog.Logger) *Service {
	return &Service{Pool: pool, Q: db.New(pool), Feedback: fb, Pairs: ps, Jobs: jobs, Secrets: secrets, Bucket: bucket, Outbound: out, Log: log}
}

// Summary is what an import stored (feedback items or pairs, by its
// kind), and what it left out and why.
type Summary struct {
	Stored     int            `json:"stored"`
	Duplicates int            `json:"duplicates"` // already stored (same external id or content), or repeated in the input
	Skipped    int            `json:"skipped"`
	Reasons    map[string]int `json:"reasons"` // why records were skipped: reason -> count
	// Skips lists the skipped records of a file with their lines, in order.
	Skips []importfile.Skip `json:"-"`
	// PairIDs are, for a pair file, the stored pairs the file's pairs are,
	// whether this import stored them or found them already there, each
	// once, so that a caller can put the file's pairs into a dataset.
	PairIDs []uuid.UUID `json:"-"`
}

// skip counts a skipped record under its reason.
func (s *Summary) skip(reason string) {
	if s.Reasons == nil {
		s.Reasons = map[string]int{}
	}
	s.Reasons[reason]++
	s.Skipped++
}

// skipLine counts a skipped record of a file and keeps its line.
func (s *Summary) skipLine(sk importfile.Skip) {
	s.skip(skipReason(sk.Reason))
	s.Skips = append(s.Skips, sk)
}

// skipReason drops the message or tree id the reader puts before the
// reason ("message 1f…: deleted (with its replies)"), so reasons add up.
func skipReason(reason string) string {
	if _, rest, ok := strings.Cut(reason, ": "); ok && (strings.HasPrefix(reason, "message ") || strings.HasPrefix(reason, "tree ")) {
		return rest
	}
	return reason
}
