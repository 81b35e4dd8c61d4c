// Package finetune launches fine-tuning jobs at a provider and drives them
// to the end: launch checks (dataset version, method, base model,
// hyperparameters, credentials), the cost estimate and the monthly budget,
// and the step-by-step state machine a worker runs, which stores each
// step's result before taking the next so that a retried worker resumes
// instead of paying twice.
package finetune

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/curate/curate/internal/jobq"
	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/pricing"
	"github.com/curate/curate/internal/provider"
)

// Service holds what launching and driving jobs needs.
type Service struct {
	Pool      *pgxpool.Pool
	Providers Providers
	// Jobs inserts each job's worker in the launch's transaction and wakes
	// it when a cancel is asked for.
	Jobs jobq.Inserter
	// Dir is this machine's scratch space. A step that needs a job's
	// training files writes them again from the frozen dataset version
	// into a folder of its own under Dir and removes it before it ends:
	// the next step may run on another machine, so no step reads what an
	// earlier one left on disk.
	Dir string
	// DefaultBudget is an organisation's monthly budget until an admin
	// sets one.
	DefaultBudget pricing.Micros
	// PollEvery is how long a worker waits between two looks at a job
	// the provider is still working on.
	PollEvery time.Duration
	// Now is the clock for budget months (default time.Now).
	Now func() time.Time
	// Registry registers what a succeeded job trained; nil registers
	// nothing.
	Registry *models.Service
	// Log receives the detail of a failed job, whose page shows a sentence
	// (default slog.Default()).
	Log *slog.Logger
	// Workers lists the workers of the GPU queue as they last reported: a
	// local launch is taken when a live one can run it. Nil checks no
	// workers (tests of the launch alone).
	Workers WorkerSource
	// WorkerID is this process's id among the workers of the GPU queue
	// (servers.WorkerReport.ID), set before it takes jobs: a local job it
	// starts records it, and the runtime its probe reported.
	WorkerID uuid.UUID
	// RLAIF checks a GRPO or PPO launch's reward from Curate; nil checks
	// only its red-team share.
	RLAIF RLAIFChecker
	// TrainerAPI is where a local trainer reaches Curate's API, for the
	// reward of an RLAIF run (see SetTrainerAPI).
	TrainerAPI string

	sweep   sync.Once // of the scratch folders dead processes left in Dir
	mu      sync.Mutex
	data    DataSource
	clients map[string]provider.Provider
	counts  map[countKey]count
	redTeam sync.Map // job id → its red-team prompts (RedTeamPrompts)
}

// SetDataSource changes where dataset versions come from, for tests that
// train on versions of their own making. It may be called while the
// service is in use.
func (s *Service) SetDataSource(d DataSource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data = d
}

// ErrNoDataSource is returned while no dataset source is configured.
var ErrNoDataSource = errors.New("finetune: dataset versions cannot be read: no dataset source is configured")

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

func (s *Service) source() (DataSource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.data == nil {
		return nil, ErrNoDataSource
	}
	return s.data, nil
}

// client returns the provider's client, built once and then reused: the
// SDK clients are safe for concurrent use.
func (s *Service) client(ctx context.Context, name string) (provider.Provider, Entry, error) {
	entry, ok := s.Providers[name]
	if !ok {
		return nil, Entry{}, fmt.Errorf("%q is not a configured provider", name)
	}
	s.mu.Lock()
	p, ok := s.clients[name]
	s.mu.Unlock()
	if ok {
		return p, entry, nil
	}
	p, err := entry.New(ctx)
	if err != nil {
		return nil, entry, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clients == nil {
		s.clients = map[string]provider.Provider{}
	}
	s.clients[name] = p
	return p, entry, nil
}

// scratchMaxAge is the age at which a scratch folder counts as left by a
// process killed mid-step: longer than any step takes (a worker's attempt
// is cut off after 30 minutes).
const scratchMaxAge = time.Hour

// scratch makes a fresh folder, readable by this user only, under Dir for
// one step's files; the caller removes it. The first call also removes
// folders that processes killed mid-step left behind, which nothing else
// would.
func (s *Service) scratch(prefix string) (string, error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return "", err
	}
	s.sweep.Do(func() {
		entries, _ := os.ReadDir(s.Dir)
		for _, e := range entries {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > scratchMaxAge {
				os.RemoveAll(filepath.Join(s.Dir, e.Name()))
			}
		}
	})
	return os.MkdirTemp(s.Dir, prefix)
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) pollEvery() time.Duration {
	if s.PollEvery > 0 {
		return s.PollEvery
	}
	return 30 * time.Second
}

// monthStart is the first instant of t's month in UTC: budgets are
// monthly.
func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}
