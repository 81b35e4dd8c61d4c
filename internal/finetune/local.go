package finetune

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/curate/curate/db"
	"github.com/curate/curate/internal/provider/local"
)

// probeEvery is how long a probe of the local machine is reused: running
// Python and importing torch takes seconds.
const probeEvery = time.Minute

// probeTimeout bounds one probe, so a launch page never hangs on it.
const probeTimeout = 5 * time.Second

type probeResult struct {
	at   time.Time
	info local.ProbeInfo
	err  error
}

// LocalProbe reports the device the local trainer would use, from the
// trainer's own probe, reusing an answer for a minute. It fails when the
// local provider is not configured or the probe cannot run.
func (s *Service) LocalProbe(ctx context.Context) (local.ProbeInfo, error) {
	s.mu.Lock()
	last := s.probe
	s.mu.Unlock()
	if last != nil && s.now().Sub(last.at) < probeEvery {
		return last.info, last.err
	}
	p, _, err := s.client(ctx, local.Name)
	if err != nil {
		return local.ProbeInfo{}, err
	}
	lp, ok := p.(*local.Provider)
	if !ok {
		return local.ProbeInfo{}, errors.New("the local provider is not the local trainer")
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	info, err := lp.Probe(pctx)
	s.mu.Lock()
	s.probe = &probeResult{at: s.now(), info: info, err: err}
	s.mu.Unlock()
	return info, err
}

// maxRunMetrics bounds how many of a run's newest metrics records are
// read at once.
const maxRunMetrics = 20000

// RunMetrics returns a local job's metrics.jsonl lines, each a JSON object
// as the trainer wrote it, oldest first: all of them, or the newest 20,000.
// They come from the database, where the worker that polls the trainer
// stores them, so any server can answer for a job trained elsewhere. A
// job that has not started yet has none.
func (s *Service) RunMetrics(ctx context.Context, j db.FineTuningJob) ([]json.RawMessage, error) {
	rows, err := db.New(s.Pool).FineTuneRunMetricList(ctx, db.FineTuneRunMetricListParams{OrgID: j.OrgID, JobID: j.ID, RowLimit: maxRunMetrics})
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, len(rows))
	for i, r := range rows {
		out[len(rows)-1-i] = r.Record
	}
	return out, nil
}

// IRSPoint is one IRS iteration's summary from metrics.jsonl: the average
// reward of its candidates and the score weights it used and chose next.
type IRSPoint struct {
	Iter            int                `json:"iter"`
	AvgReward       *float64           `json:"avg_reward"`
	RewardBreakdown map[string]float64 `json:"reward_breakdown,omitempty"`
	Weights         map[string]float64 `json:"weights,omitempty"`
	NextWeights     map[string]float64 `json:"next_weights,omitempty"`
}

// IRSPhase is where an IRS run last said it was.
type IRSPhase struct {
	Iter     int      `json:"iter"`
	Phase    string   `json:"phase"`
	Progress *float64 `json:"progress"` // percent of the phase, when given
}

// IRSSummary reads the iteration summaries (lines with avg_reward) and
// the last phase from metrics.jsonl lines.
func IRSSummary(lines []json.RawMessage) (points []IRSPoint, last IRSPhase) {
	for _, l := range lines {
		var p IRSPoint
		if json.Unmarshal(l, &p) == nil && p.AvgReward != nil && p.Iter > 0 {
			points = append(points, p)
		}
		var ph IRSPhase
		if json.Unmarshal(l, &ph) == nil && ph.Phase != "" {
			if ph.Iter == 0 {
				ph.Iter = last.Iter // a line of the iteration under way
			}
			if ph.Progress == nil && ph.Iter == last.Iter && ph.Phase == last.Phase {
				ph.Progress = last.Progress
			}
			last = ph
		}
	}
	return points, last
}
