package models_test

import (
	"testing"

	"github.com/curate/curate/internal/models"
	"github.com/curate/curate/internal/serving"
)

// A provider-hosted version answers where its target says: at the
// target's address with the target's key; at the server's OpenAI address
// with the target's key, or the server's, when the target names no
// address; never with the server's key at an address a user named. The
// model asked for is the version's model id. A webhook's version answers
// nowhere Curate can call.
func TestChatAtProvider(t *testing.T) {
	e := newDeployEnv(t)
	e.svc.Serving.ProviderKey, e.svc.Serving.ProviderBaseURL = "sk-server", "https://openai.example/v1/"
	e.target(t, serving.NewTarget{Name: "own", Kind: serving.KindOpenAI, BaseURL: "http://127.0.0.1:9/v1", APIKey: "sk-own"})
	e.target(t, serving.NewTarget{Name: "compatible", Kind: serving.KindOpenAI, BaseURL: "http://127.0.0.1:9/compat/v1"})
	e.target(t, serving.NewTarget{Name: "openai", Kind: serving.KindOpenAI})
	e.target(t, serving.NewTarget{Name: "keyed", Kind: serving.KindOpenAI, APIKey: "sk-keyed"})
	e.target(t, serving.NewTarget{Name: "pipeline", Kind: serving.KindWebhook, BaseURL: "http://127.0.0.1:9/hook",
		APIKey: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"})
	want := map[string]models.ChatTarget{
		"own":        {BaseURL: "http://127.0.0.1:9/v1", APIKey: "sk-own"},
		"compatible": {BaseURL: "http://127.0.0.1:9/compat/v1"},
		"openai":     {BaseURL: "https://openai.example/v1", APIKey: "sk-server"},
		"keyed":      {BaseURL: "https://openai.example/v1", APIKey: "sk-keyed"},
	}
	for i, target := range []string{"own", "compatible", "openai", "keyed", "pipeline"} {
		modelID := "ft:gpt-4o-mini-2024-07-18:acme::" + target
		v := e.register(t, "1."+string(rune('0'+i))+".0", models.KindFull, modelID)
		d, err := e.svc.Deploy(e.ctx, admin, e.org, v.ID, models.DeployRequest{Alias: "staging-" + target, Target: target, Reason: "served"})
		if err != nil {
			t.Fatal(err)
		}
		if target == "pipeline" {
			// The team's pipeline took it (as its 2xx would say): served
			// there, but not where Curate can call it.
			if _, err := e.pool.Exec(e.ctx, `UPDATE deployments SET status = 'succeeded', finished_at = now() WHERE id = $1`, d.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := e.svc.Chat(e.ctx, e.org, v.ID); err != models.ErrNotServed {
				t.Errorf("%s: %v, want not served", target, err)
			}
			continue
		}
		if err := e.svc.Advance(e.ctx, d.ID); err != nil {
			t.Fatal(err)
		}
		got, err := e.svc.Chat(e.ctx, e.org, v.ID)
		w := want[target]
		w.Model = modelID
		if err != nil || got != w {
			t.Errorf("%s: %+v %v, want %+v", target, got, err, w)
		}
	}
}
