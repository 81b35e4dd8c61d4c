// Package importer brings feedback into Curate from outside: files (Curate's
// own JSONL, OpenAssistant message trees) uploaded in the browser or given
// to the CLI, and an organisation's Langfuse project, synced periodically.
// It maps what it reads to feedback.Item and stores it through
// feedback.Service, all or nothing: a file with one bad line, or a sync that
// loses its connection halfway, stores nothing.
//
// Import runs and Langfuse connections are rows (import_runs,
// langfuse_connections) whose progress, counts and errors the pages show.
// The package knows nothing of HTTP or River: handlers and jobs call it.
package importer

import (
	"log/slog"
	"net/http"
	"path/filepath"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/config"
	"github.com/curate/curate/internal/feedback"
	"github.com/curate/curate/internal/secrets"
)

// Service runs imports for one database.
type Service struct {
	Pool     *pgxpool.Pool
	Q        *db.Queries
	Feedback *feedback.Service
	Secrets  *secrets.Box
	// DataDir holds uploaded files under imports/<run id> until their run ends.
	DataDir string
	// HTTP talks to Langfuse; nil means the Langfuse client's default.
	HTTP *http.Client
	Log  *slog.Logger
}

// New builds the service from the configuration: the data directory and the
// key that encrypts stored secrets (see config.Config.Secret).
func New(pool *pgxpool.Pool, cfg config.Config, log *slog.Logger) (*Service, error) {
	key, err := cfg.Secret()
	if err != nil {
		return nil, err
	}
	box, err := secrets.New(key)
	if err != nil {
		return nil, err
	}
	return &Service{Pool: pool, Q: db.New(pool), Feedback: &feedback.Service{Pool: pool}, Secrets: box, DataDir: cfg.DataDir, Log: log}, nil
}

// UploadPath is where an uploaded file waits for its run.
func (s *Service) UploadPath(runID uuid.UUID) string {
	return filepath.Join(s.DataDir, "imports", runID.String())
}

// Summary is what an import stored, and what it left out and why.
type Summary struct {
	Stored     int            `json:"stored"`
	Duplicates int            `json:"duplicates"` // already stored (same external id), or repeated in the input
	Skipped    int            `json:"skipped"`
	Reasons    map[string]int `json:"reasons"` // why records were skipped: reason -> count
}

func (s *Summary) skip(reason string) {
	if s.Reasons == nil {
		s.Reasons = map[string]int{}
	}
	s.Reasons[reason]++
	s.Skipped++
}
