package finetune

import (
	"fmt"

	"github.com/curate/curate/db"
)

// CostGap says in words how a finished job's trained tokens compare with
// its estimate, and why they differ: the provider bills the training
// file's tokens times the epochs it ran, so a gap is other epochs, another
// count of the file, or a job stopped before its end. It is "" until the
// provider has reported what it trained.
func CostGap(j db.FineTuningJob) string {
	if !j.ActualCost.Valid {
		return ""
	}
	est, got := j.EstimatedTokens, j.TrainedTokens
	switch {
	case got == est:
		return fmt.Sprintf("As estimated: the provider billed the %d tokens the estimate counted.", est)
	case got == 0:
		return "The provider reported no trained tokens: nothing was billed."
	}
	stopped := j.Status == db.FinetuneStatusCancelled || j.Status == db.FinetuneStatusFailed
	if stopped && got < est {
		return fmt.Sprintf("The job %s before its end, so the provider billed %d of the %d estimated tokens: only the training done.", finished(j.Status), got, est)
	}
	ran, assumed := int64(j.TotalEpochs), int64(j.EstimatedEpochs)
	perEst := est / max(assumed, 1)
	if ran > 0 && ran != assumed {
		msg := fmt.Sprintf("The provider ran %d epochs where the estimate assumed %d", ran, assumed)
		if perGot := got / ran; perGot != perEst {
			msg += fmt.Sprintf(", and counted %d tokens per epoch against the estimate's %d", perGot, perEst)
		}
		return msg + "; the cost follows the epochs run."
	}
	epochs := max(ran, assumed, 1)
	perGot := got / epochs
	return fmt.Sprintf("The provider counted %d tokens per epoch where the estimate counted %d (%+.1f%%): its tokenizer or its framing of each message differs from the estimate's.",
		perGot, perEst, 100*float64(perGot-perEst)/float64(max(perEst, 1)))
}
