package finetune

import (
	"github.com/google/uuid"
	"github.com/riverqueue/river"
)

// JobArgs is the River job that drives one fine-tuning job at its provider
// to the end. Launch inserts it in the launch's transaction; its worker
// lives in the jobs package.
type JobArgs struct {
	JobID uuid.UUID `json:"job_id"`
	// Local puts the worker on the GPU queue: a job trained on this
	// machine waits there for a slot rather than holding a default worker.
	Local bool `json:"local,omitempty"`
}

// QueueGPU is the queue of local training jobs; it has one worker per GPU
// slot.
const QueueGPU = "gpu"

// Kind names the job in River's table.
func (JobArgs) Kind() string { return "finetune_advance" }

// KindAliases keeps the jobs queued under the kind's earlier name worked;
// it can go once no row of river_job has that kind.
func (JobArgs) KindAliases() []string { return []string{"finetune"} }

// InsertOpts keeps one worker per fine-tuning job.
func (a JobArgs) InsertOpts() river.InsertOpts {
	opts := river.InsertOpts{MaxAttempts: 20, UniqueOpts: river.UniqueOpts{ByArgs: true}}
	if a.Local {
		opts.Queue = QueueGPU
	}
	return opts
}
