package finetune_test

import (
	"context"
	"errors"
	"testing"

	"github.com/curate/curate/internal/errs"
	"github.com/curate/curate/internal/finetune"
	"github.com/curate/curate/internal/finetune/finetunetest"
	"github.com/curate/curate/internal/provider"
	"github.com/curate/curate/internal/provider/bedrocktest"
	"github.com/curate/curate/internal/provider/openaitest"
)

// The seed's fine_tuning_jobs in its own words: no method (the dataset's
// type decides it), provider "anthropic" for Claude at Bedrock, and base
// models named without their snapshot or context suffix. Each launch
// stores Curate's provider, the snapshot and the price of the snapshot.
func TestLaunchSeedDefaults(t *testing.T) {
	reg := finetune.Providers{"openai": openaiEntry(openaitest.New(t)), "bedrock": bedrockEntry(bedrocktest.New(t))}
	e := newEnv(t, reg)
	pairs := e.src.AddPref(e.org, "p v1", finetunetest.Pairs(4), 1)
	chats := e.src.AddSFT(e.org, "c v1", finetunetest.Chats(4), 1)
	for _, tc := range []struct {
		name                 string
		req                  finetune.Request
		provider, model      string
		requested            string
		method               provider.Method
		perMillion, estimate float64 // dollars
	}{
		// 3 training pairs of 18 tokens each (TestFineTuneAPI's figure)
		// × 3 epochs = 162 tokens, at $3 per million.
		{"pairs train dpo", finetune.Request{DatasetID: pairs.DatasetID, Provider: "openai", BaseModel: mini,
			Hyper: provider.Hyperparameters{Epochs: provider.Num(3)}}, "openai", mini, "", provider.DPO, 3, 0.000486},
		{"single examples train supervised", finetune.Request{DatasetID: chats.DatasetID, Provider: "openai", BaseModel: "gpt-4o-mini",
			Hyper: provider.Hyperparameters{Epochs: provider.Num(1)}}, "openai", mini, "gpt-4o-mini", provider.Supervised, 3, -1},
		{"anthropic is bedrock", finetune.Request{DatasetID: chats.DatasetID, Provider: "anthropic",
			BaseModel: "anthropic.claude-3-haiku-20240307-v1:0"}, "bedrock", haiku, "anthropic.claude-3-haiku-20240307-v1:0", provider.Supervised, 4, -1},
		{"claude's short name", finetune.Request{VersionID: chats.ID, Provider: "anthropic", BaseModel: "claude-3-haiku"},
			"bedrock", haiku, "claude-3-haiku", provider.Supervised, 4, -1},
		{"bedrock's own id", finetune.Request{VersionID: chats.ID, Provider: "bedrock", BaseModel: haiku},
			"bedrock", haiku, "", provider.Supervised, 4, -1},
	} {
		job, est, err := e.svc.Launch(context.Background(), admin, e.org, tc.req)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if job.Provider != tc.provider || job.BaseModel != tc.model || job.Method != string(tc.method) || est.Request.RequestedModel != tc.requested {
			t.Errorf("%s: stored %s %s %s (asked as %q); want %s %s %s (asked as %q)", tc.name, job.Provider, job.BaseModel, job.Method,
				est.Request.RequestedModel, tc.provider, tc.model, tc.method, tc.requested)
		}
		if !job.PriceID.Valid || est.Price.PerMillion != tc.perMillion || est.Price.BaseModel != tc.model {
			t.Errorf("%s: priced %+v; want the %s row at $%v", tc.name, est.Price, tc.model, tc.perMillion)
		}
		if tc.estimate >= 0 && est.Cost.Dollars() != tc.estimate {
			t.Errorf("%s: estimated $%v, want $%v", tc.name, est.Cost.Dollars(), tc.estimate)
		}
	}

	// Bedrock trains no pairs: the dataset's own method is refused by name.
	_, _, err := e.svc.Launch(context.Background(), admin, e.org, finetune.Request{DatasetID: pairs.DatasetID, Provider: "anthropic"})
	var inv *errs.Invalid
	if !errors.As(err, &inv) || inv.ByField()["method"] == "" {
		t.Errorf("pairs at Bedrock: %v; want a message on method", err)
	}
	// With no dataset there is no type to decide the method: only the
	// dataset's field is named.
	_, _, err = e.svc.Launch(context.Background(), admin, e.org, finetune.Request{Provider: "openai", BaseModel: mini})
	if !errors.As(err, &inv) || len(inv.Errors) != 1 || inv.Errors[0].Field != "dataset_version_id" {
		t.Errorf("no dataset: %v; want one message, on dataset_version_id", err)
	}
	if got := reg.Resolve("huggingface"); got != "huggingface" {
		t.Errorf("huggingface without a local provider resolved to %q", got)
	}
}
