package models

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/serving"
)

// Takes reports whether a serving target of targetKind can take a version
// of versionKind: vLLM loads LoRA adapters onto its base model at runtime
// (it cannot load a full model without a restart), vLLM's pooling runner
// serves the reward model it was started with, a provider serves its own
// hosted models (nothing to load, so no adapter), and a webhook hands any
// to the team's own pipeline.
func Takes(targetKind, versionKind string) bool {
	switch targetKind {
	case serving.KindVLLM:
		return versionKind == KindLoRA
	case serving.KindVLLMPooling:
		return versionKind == KindReward
	case serving.KindOpenAI:
		return versionKind == KindFull
	}
	return true
}

// kindWords is a kind of version in a sentence.
var kindWords = map[string]string{KindFull: "a full model", KindLoRA: "a LoRA adapter", KindReward: "a reward model"}

// refuseTarget is why a deployment of a version to a target cannot be, as
// the "target" field's error; nil when the target takes it.
func refuseTarget(target, targetKind, name, version, versionKind string) error {
	if Takes(targetKind, versionKind) {
		return nil
	}
	is := kindWords[versionKind]
	switch {
	case targetKind == serving.KindVLLM && versionKind == KindReward:
		return errs.InvalidField("target", "%s loads LoRA adapters at runtime; %s %s is a reward model: deploy it to a vLLM server running it with the pooling runner", target, name, version)
	case targetKind == serving.KindVLLM:
		return errs.InvalidField("target", "%s loads LoRA adapters at runtime; %s %s is %s", target, name, version, is)
	case targetKind == serving.KindVLLMPooling:
		return errs.InvalidField("target", "%s serves a reward model with vLLM's pooling runner; %s %s is %s", target, name, version, is)
	}
	return errs.InvalidField("target", "%s serves the provider's own models; %s %s is %s", target, name, version, is)
}

// TargetsFor lists the organisation's serving targets that can take the
// version, by name.
func (s *Service) TargetsFor(ctx context.Context, orgID, versionID uuid.UUID) ([]serving.Target, error) {
	v, err := s.Get(ctx, orgID, versionID)
	if err != nil {
		return nil, err
	}
	all, err := s.Serving.List(ctx, orgID)
	if err != nil {
		return nil, err
	}
	var out []serving.Target
	for _, t := range all {
		if Takes(t.Kind, v.Kind) {
			out = append(out, t)
		}
	}
	return out, nil
}

// Reach is whether Curate can send a version prompts (an evaluation asks
// it its golden set's questions), and where it could be deployed so that
// it can.
type Reach struct {
	// Served: a target Curate calls serves the version.
	Served bool
	// Deploying is a deployment of the version under way, if any.
	Deploying *Deployment
	// Failed is why the version's newest deployment failed, when it did.
	Failed string
	// Targets are the targets Curate calls that can take the version: a
	// deployment there makes it answer.
	Targets []serving.Target
}

// ReachOf says whether Curate can send a version prompts and, when it
// cannot, where it could be deployed so that it can.
func (s *Service) ReachOf(ctx context.Context, orgID, versionID uuid.UUID) (Reach, error) {
	var out Reach
	switch _, err := s.Chat(ctx, orgID, versionID); {
	case err == nil:
		out.Served = true
		return out, nil
	case !errors.Is(err, ErrNotServed):
		return out, err
	}
	deps, err := s.Deployments(ctx, orgID, versionID)
	if err != nil {
		return out, err
	}
	for i, d := range deps {
		if d.Status == "queued" || d.Status == "running" {
			out.Deploying = &d
			break
		}
		if i == 0 && d.Status == "failed" {
			out.Failed = d.Error
		}
	}
	targets, err := s.TargetsFor(ctx, orgID, versionID)
	if err != nil {
		return out, err
	}
	for _, t := range targets {
		if serving.CanChat(t.Kind) {
			out.Targets = append(out.Targets, t)
		}
	}
	return out, nil
}
