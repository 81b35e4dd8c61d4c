package finetune

import (
	"context"

	"github.com/curate/curate/internal/provider/local"
)

// NotConfigured is why a provider whose client cannot be built is not
// offered: its key, bucket, role or region is missing.
const NotConfigured = "credentials not configured"

// Unavailable says, for each provider that cannot take a job from this
// server, why, as the launch form shows it; a provider it leaves out can.
// The local trainer is refused only when its probe answered that this
// machine cannot run it: a probe that could not run at all proves
// nothing, and the job's own run then says what is wrong.
func (s *Service) Unavailable(ctx context.Context) map[string]string {
	out := map[string]string{}
	for _, name := range s.Providers.Names() {
		if why := s.unavailable(ctx, name); why != "" {
			out[name] = why
		}
	}
	return out
}

func (s *Service) unavailable(ctx context.Context, name string) string {
	if _, _, err := s.client(ctx, name); err != nil {
		// The client's words name settings and variables: the log keeps
		// them, the form says what it means.
		s.log().Debug("fine-tuning provider not configured", "provider", name, "err", err)
		return NotConfigured
	}
	if name != local.Name {
		return ""
	}
	info, err := s.LocalProbe(ctx)
	if err != nil {
		return ""
	}
	return info.CannotRun()
}
