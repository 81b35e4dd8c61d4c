package experiments

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/errs"
)

// Assignment is what a unit gets: its arm and what to call.
type Assignment struct {
	UnitID       string `json:"unit_id,omitempty"`
	Arm          string `json:"arm"`
	ArmIndex     int    `json:"arm_index"`
	InExperiment bool   `json:"in_experiment"`
	Version      string `json:"version"`
	Model        string `json:"model"`
	BaseURL      string `json:"base_url"`
	// Fallback: the unit's arm is not served now, and it is sent to the
	// control's model instead (Version, Model and BaseURL are the
	// control's); NotServed says why.
	Fallback  bool   `json:"fallback"`
	NotServed string `json:"not_served,omitempty"`
}

// config is an experiment's configuration as assignment reads it: its
// status, seed, phase and coverage, its arms with their weights and where
// each is called, and the count of changes made to it when it was read
// (see migration 00061).
type config struct {
	id         uuid.UUID
	key        string
	status     string
	seed       string
	phase      int32
	phaseStart *time.Time
	coverage   float64
	version    int64
	weights    []float64
	arms       []db.ExperimentConfigGetRow
}

// configs are the configurations this process has read, by organisation
// and key. A copy is only acted on once the database has confirmed, in the
// statement that records the exposures, that nothing has changed since it
// was read, so every server of a deployment keeps its own.
type configs struct {
	mu sync.RWMutex
	m  map[configKey]*config
}

type configKey struct {
	org uuid.UUID
	key string
}

// maxConfigs bounds the copies kept; past it they are all dropped and read
// again as they are used.
const maxConfigs = 10_000

func (c *configs) get(org uuid.UUID, key string) *config {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[configKey{org, key}]
}

func (c *configs) put(org uuid.UUID, cfg *config) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxConfigs {
		c.m = map[configKey]*config{}
	}
	c.m[configKey{org, cfg.key}] = cfg
}

func (c *configs) drop(org uuid.UUID, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, configKey{org, key})
}

// readConfig reads an experiment's configuration in one statement and
// keeps it.
func (s *Service) readConfig(ctx context.Context, q *db.Queries, orgID uuid.UUID, key string) (*config, error) {
	rows, err := q.ExperimentConfigGet(ctx, db.ExperimentConfigGetParams{OrgID: orgID, Key: key})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		s.configs.drop(orgID, key)
		return nil, errs.ErrNotFound
	}
	r := rows[0]
	c := &config{id: r.ID, key: key, status: string(r.Status), seed: r.Seed, phase: r.Phase, phaseStart: r.PhaseStartedAt,
		coverage: r.Coverage, version: r.ConfigVersion, arms: rows}
	for _, a := range rows {
		c.weights = append(c.weights, a.Weight)
	}
	s.configs.put(orgID, c)
	return c, nil
}

// configTries is how often one call reads a configuration that changed
// under it before it holds the configuration still while it assigns.
const configTries = 3

// Assign gives units their arms in a running experiment: the hash of the
// seed and the unit id places each; a unit exposed before keeps the arm it
// first had (sticky, whatever the weights are now). Units outside the
// coverage get the control's model and are not recorded.
//
// The experiment's configuration comes from this process's copy, and one
// statement records the new units' exposures, answers the known units'
// arms and confirms the copy is current; when it is not, nothing was
// recorded, and the configuration is read again and the units placed
// again.
func (s *Service) Assign(ctx context.Context, orgID uuid.UUID, key string, units []string) ([]Assignment, error) {
	if err := checkUnits(units); err != nil {
		return nil, err
	}
	q := db.New(s.Pool)
	c := s.configs.get(orgID, key)
	for range configTries {
		var err error
		// A copy of an experiment that was not running is read again: it
		// may have started since.
		if c == nil || c.status != Running {
			if c, err = s.readConfig(ctx, q, orgID, key); err != nil {
				return nil, err
			}
		}
		out, current, err := s.assign(ctx, q, orgID, c, units)
		if err != nil || current {
			return out, err
		}
		c = nil
	}
	// Changed at every try: read and assign with the configuration held
	// still.
	var out []Assignment
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		if err := q.ExperimentConfigGetForShare(ctx, db.ExperimentConfigGetForShareParams{OrgID: orgID, Key: key}); err != nil {
			return err
		}
		c, err := s.readConfig(ctx, q, orgID, key)
		if err != nil {
			return err
		}
		var current bool
		if out, current, err = s.assign(ctx, q, orgID, c, units); err == nil && !current {
			err = fmt.Errorf("experiments: the configuration of %s changed while it was held", key)
		}
		return err
	})
	return out, err
}

// assign places units by the configuration c and records their
// exposures; current is false, and nothing is recorded, when c is out of
// date.
func (s *Service) assign(ctx context.Context, q *db.Queries, orgID uuid.UUID, c *config, units []string) (out []Assignment, current bool, err error) {
	if c.status != Running {
		return nil, true, &errs.Conflict{Message: fmt.Sprintf("The experiment %s is %s: units are assigned only while it runs.", c.key, c.status)}
	}
	arms := make([]int32, len(units))
	for i, u := range units {
		arms[i] = int32(Choose(Hash(c.seed, u), c.coverage, c.weights))
	}
	if len(units) == 1 {
		return s.assignOne(ctx, q, orgID, c, units[0], arms[0])
	}
	r, err := q.ExposureInsertAssigned(ctx, db.ExposureInsertAssignedParams{ExperimentID: c.id, OrgID: orgID, UnitIds: units, Arms: arms,
		Phase: c.phase, ConfigVersion: c.version})
	switch {
	case errors.Is(err, pgx.ErrNoRows): // the experiment is gone
		return nil, false, nil
	case err != nil:
		return nil, false, err
	case r.ConfigVersion != c.version:
		return nil, false, nil
	}
	out, err = c.answer(units, r.UnitIds, r.Arms)
	return out, true, err
}

// assignOne is assign for one unit, placed in arm (-1 outside the
// coverage), with the statement made for one.
func (s *Service) assignOne(ctx context.Context, q *db.Queries, orgID uuid.UUID, c *config, unit string, arm int32) ([]Assignment, bool, error) {
	r, err := q.ExposureInsertAssignedOne(ctx, db.ExposureInsertAssignedOneParams{ExperimentID: c.id, OrgID: orgID, Phase: c.phase,
		UnitID: unit, Arm: arm, ConfigVersion: c.version})
	switch {
	case errors.Is(err, pgx.ErrNoRows): // the experiment is gone
		return nil, false, nil
	case err != nil:
		return nil, false, err
	case r.ConfigVersion != c.version:
		return nil, false, nil
	}
	var recordedUnits []string
	var recordedArms []int32
	if r.Arm >= 0 {
		recordedUnits, recordedArms = []string{unit}, []int32{r.Arm}
	}
	out, err := c.answer([]string{unit}, recordedUnits, recordedArms)
	return out, true, err
}

// checkUnits refuses an empty or oversized batch and unit ids that are
// empty, too long or not text.
func checkUnits(units []string) error {
	v := &errs.Invalid{}
	if len(units) == 0 || len(units) > MaxBatch {
		v.Add("unit_ids", "give 1 to %d unit ids", MaxBatch)
	}
	for i, u := range units {
		field := "unit_id"
		if len(units) > 1 {
			field = fmt.Sprintf("unit_ids[%d]", i)
		}
		checkUnit(v, field, u)
	}
	return v.Err()
}

func checkUnit(v *errs.Invalid, field, u string) {
	if u == "" {
		v.Add(field, "is required")
	} else if len(u) > MaxUnitID || !utf8.ValidString(u) || strings.ContainsRune(u, 0) {
		v.Add(field, "must be valid text of at most %d bytes", MaxUnitID)
	}
}

// answer says what each unit calls, from the arms recorded for them; a
// unit with none is outside the coverage and calls the control's model.
// A unit of an arm whose version is no longer served where it is called
// calls the control's model, flagged as a fallback; with the control not
// served either, the call is refused by name.
func (c *config) answer(units, recordedUnits []string, recordedArms []int32) ([]Assignment, error) {
	recorded := make(map[string]int, len(recordedUnits))
	for i, u := range recordedUnits {
		recorded[u] = int(recordedArms[i])
	}
	out := make([]Assignment, len(units))
	for i, u := range units {
		a := Assignment{UnitID: u}
		if arm, ok := recorded[u]; ok {
			a.ArmIndex, a.InExperiment = arm, true
		}
		if a.ArmIndex >= len(c.arms) {
			return nil, fmt.Errorf("experiments: %s recorded in arm %d of %s, which has %d", u, a.ArmIndex, c.key, len(c.arms))
		}
		arm := c.arms[a.ArmIndex]
		a.Arm = arm.Name
		if !arm.Served {
			// The serving check found the arm's version missing and is
			// loading it again: until then its units call the control.
			control := c.arms[0]
			if !control.Served {
				return nil, &errs.Conflict{Message: fmt.Sprintf("The %s arm's version %s is no longer served where the experiment calls it, "+
					"nor is the control's %s: Curate is loading them again.", arm.Name, arm.Version, control.Version)}
			}
			a.Fallback = true
			a.NotServed = notServed(arm)
			arm = control
		}
		a.Version, a.BaseURL = arm.Version, arm.BaseUrl
		a.Model = cmp.Or(arm.ServedName, arm.ModelID)
		out[i] = a
	}
	return out, nil
}

// Config is everything a client needs to assign units itself, as
// GrowthBook's SDKs do: the unit's value is Hash(seed, unit id), placed by
// Choose in the weights scaled by the coverage (see the README). It is
// served with ConfigVersion, the count of changes made to it, as its ETag.
type Config struct {
	Key    string `json:"key"`
	Status string `json:"status"`
	Seed   string `json:"seed"`
	Phase  int    `json:"phase"`
	// PhaseStartedAt is when the phase began: exposures reported from
	// before it belong to an earlier phase and are not recorded.
	PhaseStartedAt *time.Time  `json:"phase_started_at"`
	Coverage       float64     `json:"coverage"`
	Weights        []float64   `json:"weights"`
	Arms           []ConfigArm `json:"arms"`
	// NotServed names the arms not served now, whose units call the
	// control's model.
	NotServed     []string `json:"not_served"`
	ConfigVersion int64    `json:"config_version"`
}

// ConfigArm is an arm and what to call for it. An arm not Served cannot
// take traffic: its units call the control's model until the serving
// check has its version loaded again, and NotServed says why.
type ConfigArm struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	Model     string `json:"model"`
	BaseURL   string `json:"base_url"`
	Served    bool   `json:"served"`
	NotServed string `json:"not_served,omitempty"`
}

// notServed says why an arm is not served.
func notServed(a db.ExperimentConfigGetRow) string {
	if a.ServedName == "" {
		return fmt.Sprintf("the %s arm's version %s is not served where the experiment calls it", a.Name, a.Version)
	}
	return fmt.Sprintf("the %s arm's version %s is no longer listed as %s by its serving target; it is being loaded again, and its units call the control's model until then",
		a.Name, a.Version, a.ServedName)
}

// Config reads an experiment's configuration: this process's copy when
// the database's count of changes agrees with it, else afresh.
func (s *Service) Config(ctx context.Context, orgID uuid.UUID, key string) (Config, error) {
	q := db.New(s.Pool)
	v, err := q.ExperimentConfigGetVersion(ctx, db.ExperimentConfigGetVersionParams{OrgID: orgID, Key: key})
	if err != nil {
		s.configs.drop(orgID, key)
		return Config{}, errs.NotFound(err)
	}
	c := s.configs.get(orgID, key)
	if c == nil || c.id != v.ID || c.version != v.ConfigVersion {
		if c, err = s.readConfig(ctx, q, orgID, key); err != nil {
			return Config{}, err
		}
	}
	out := Config{Key: c.key, Status: c.status, Seed: c.seed, Phase: int(c.phase), PhaseStartedAt: c.phaseStart, Coverage: c.coverage,
		Weights: c.weights, ConfigVersion: c.version}
	out.NotServed = []string{}
	for _, a := range c.arms {
		arm := ConfigArm{Index: int(a.Idx), Name: a.Name, Version: a.Version, Model: cmp.Or(a.ServedName, a.ModelID),
			BaseURL: a.BaseUrl, Served: a.Served}
		if !a.Served {
			arm.NotServed = notServed(a)
			out.NotServed = append(out.NotServed, a.Name)
		}
		out.Arms = append(out.Arms, arm)
	}
	return out, nil
}

// Exposure is a unit's exposure to an arm that a client assigned itself.
type Exposure struct {
	UnitID   string     `json:"unit_id"`
	ArmIndex *int       `json:"arm_index"`
	At       *time.Time `json:"at"`
}

// Recorded is what reporting exposures did: the units whose first
// exposure of the phase was recorded; the others (a unit already
// recorded, or reported twice); of all the units, those newly counted as
// seen in two arms; and the exposures from before the phase began, which
// are not recorded.
type Recorded struct {
	Inserted     int64 `json:"inserted"`
	Duplicates   int64 `json:"duplicates"`
	Conflicts    int64 `json:"conflicts"`
	EarlierPhase int64 `json:"earlier_phase"`
}

// clockSkew is how far in the future a reported exposure may lie, its
// client's clock being ahead; it is recorded at the present.
const clockSkew = 5 * time.Minute

// RecordExposures records exposures a client assigned itself in a running
// or paused experiment's current phase, idempotently: a unit's earliest
// exposure is its first unless one is recorded already, and a unit
// reported in another arm than its recorded one is counted once as a unit
// seen in two arms. The whole batch is refused when any exposure is
// malformed.
func (s *Service) RecordExposures(ctx context.Context, orgID uuid.UUID, key string, in []Exposure) (Recorded, error) {
	now := s.now()
	v := &errs.Invalid{}
	if len(in) == 0 || len(in) > MaxBatch {
		v.Add("exposures", "give 1 to %d exposures", MaxBatch)
	}
	for i, x := range in {
		field := fmt.Sprintf("exposures[%d].", i)
		checkUnit(v, field+"unit_id", x.UnitID)
		if x.ArmIndex == nil {
			v.Add(field+"arm_index", "is required")
		}
		if x.At == nil {
			v.Add(field+"at", "is required: when the unit was exposed")
		} else if x.At.After(now.Add(clockSkew)) {
			v.Add(field+"at", "is in the future")
		}
	}
	if err := v.Err(); err != nil {
		return Recorded{}, err
	}
	var out Recorded
	err := db.InTx(ctx, s.Pool, func(_ pgx.Tx, q *db.Queries) error {
		arms, err := q.ExperimentConfigGet(ctx, db.ExperimentConfigGetParams{OrgID: orgID, Key: key})
		if err != nil {
			return err
		}
		if len(arms) == 0 {
			return errs.ErrNotFound
		}
		e := arms[0]
		if e.Status != db.ExperimentStatusRunning && e.Status != db.ExperimentStatusPaused {
			return &errs.Conflict{Message: fmt.Sprintf("The experiment %s is %s: exposures are recorded only while it runs or is paused.", key, e.Status)}
		}
		p := db.ExposureInsertReportedParams{ExperimentID: e.ID, Phase: e.Phase}
		for i, x := range in {
			if *x.ArmIndex < 0 || *x.ArmIndex >= len(arms) {
				v.Add(fmt.Sprintf("exposures[%d].arm_index", i), "must be 0 to %d: an arm's index", len(arms)-1)
				continue
			}
			if e.PhaseStartedAt != nil && x.At.Before(*e.PhaseStartedAt) {
				out.EarlierPhase++
				continue
			}
			at := *x.At
			if at.After(now) {
				at = now
			}
			p.UnitIds, p.Arms, p.Ats = append(p.UnitIds, x.UnitID), append(p.Arms, int32(*x.ArmIndex)), append(p.Ats, at)
		}
		if err := v.Err(); err != nil {
			return err
		}
		if len(p.UnitIds) == 0 {
			return nil
		}
		if out.Inserted, err = q.ExposureInsertReported(ctx, p); err != nil {
			return err
		}
		out.Duplicates = int64(len(p.UnitIds)) - out.Inserted
		out.Conflicts, err = q.ExposureUpdateOtherArm(ctx, db.ExposureUpdateOtherArmParams{ExperimentID: e.ID, Phase: e.Phase,
			UnitIds: p.UnitIds, Arms: p.Arms})
		return err
	})
	if err != nil {
		return Recorded{}, err
	}
	return out, nil
}
