package scorers

import (
	"maps"
	"slices"
)

// Presets are ready-made scorers a configuration can name. chain,
// emergency and risk are the rule scores of the reward formula in the
// design's fine-tuning plan (chain-of-thought coverage, emergency coverage,
// risky-advice penalty); they are starting points for a medical assistant,
// and an organisation with other needs configures its own phrases under
// the same names.
var Presets = map[string]Config{
	// chain: the answer reasons in an explicit <think> block and then
	// answers after it (the SFT models' output format).
	"chain": {Name: "chain", Kind: KindRequired, Patterns: []string{
		`<think>\s*\S[\s\S]*?</think>`, // a non-empty reasoning block
		`</think>\s*\S`,                // an answer after it
	}},
	// emergency: the answer tells the patient when and how to get urgent
	// care; each pattern is one element of that advice.
	"emergency": {Name: "emergency", Kind: KindRequired, Patterns: []string{
		// Where to go: emergency services, a hospital's emergency room.
		`\b(?:emergency (?:services|room|department)|ER|A&E|911|999|112|120)\b|急诊|急救|拨打120`,
		// How soon: now, not after waiting.
		`\b(?:immediately|right away|at once|without delay|urgent(?:ly)?)\b|立即|立刻|马上|尽快`,
		// Which signs mean it cannot wait.
		`\b(?:warning signs?|red flags?|if (?:the )?(?:symptoms?|pain|it) (?:get|gets|becomes?) worse|worsen(?:s|ing)?)\b|危险信号|加重|恶化`,
	}},
	// risk: advice that endangers the patient; any one makes the answer
	// risky (score 1), to be weighted negatively.
	"risk": {Name: "risk", Kind: KindForbidden, Mode: "any", Patterns: []string{
		`\b(?:stop|quit) taking (?:your|the|all)? ?(?:medication|medicine|pills|insulin)\b`,
		`\b(?:double|triple|increase) (?:the|your) (?:dose|dosage)\b`,
		`\bno need to (?:see|visit|consult) (?:a|your|the) (?:doctor|physician|gp)\b`,
		`\b(?:antibiotics?|opioids?) without (?:a )?prescription\b`,
		`\b(?:wait|waiting) (?:and see )?(?:a few days|until tomorrow)\b.*\b(?:chest pain|stroke|bleeding)\b`,
		`自行停药|加倍服用|不用看医生|无需就医`,
	}},
	"refusal":           {Name: "refusal", Kind: KindRefusal},
	"reference_f1":      {Name: "reference_f1", Kind: KindReferenceF1},
	"reference_rouge_l": {Name: "reference_rouge_l", Kind: KindReferenceRougeL},
	// concise: 20 to 300 words, the length of a helpful chat answer.
	"concise": {Name: "concise", Kind: KindLength, Unit: "words", Min: 20, Max: 300},
}

// PresetNames lists the scorers a configuration can name alone, sorted:
// the presets and the judge (a reward model is named with its version).
func PresetNames() []string {
	names := slices.Collect(maps.Keys(Presets))
	for _, e := range External {
		if e != KindRewardModel {
			names = append(names, e)
		}
	}
	return slices.Sorted(slices.Values(names))
}
