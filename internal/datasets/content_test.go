package datasets

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/curate/curate/internal/export"
)

func TestCanonicalEncoding(t *testing.T) {
	pref := Example{System: "Be brief.", Prompt: []export.Message{{Role: "user", Content: "<b>2+2</b>?"}}, Chosen: "4", Rejected: "5"}
	got, err := pref.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"system":"Be brief.","prompt":[{"role":"user","content":"<b>2+2</b>?"}],"chosen":"4","rejected":"5"}`
	if string(got) != want {
		t.Fatalf("canonical\n got %s\nwant %s", got, want)
	}
	sft := Example{Messages: []export.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello"}}}
	got, _ = sft.Canonical()
	if want := `{"system":"","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`; string(got) != want {
		t.Fatalf("canonical\n got %s\nwant %s", got, want)
	}
}

func TestVersionHash(t *testing.T) {
	a := sha256.Sum256([]byte("a"))
	b := sha256.Sum256([]byte("b"))
	cfg := SplitConfig{Strategy: "random", ValidationPercent: 20, Seed: 42}
	h1 := versionHash("preference", cfg, []hashedItem{{a, "train"}, {b, "validation"}})
	h2 := versionHash("preference", cfg, []hashedItem{{b, "validation"}, {a, "train"}})
	if h1 != h2 {
		t.Fatal("the order of items changed the hash")
	}
	// The documented encoding, written out by hand; sha256("a") starts
	// ca97..., sha256("b") starts 3e23..., so b's line comes first.
	text := "curate-dataset-version/1 kind=preference split=random validation_percent=20 seed=42\n" +
		hex.EncodeToString(b[:]) + " validation\n" + hex.EncodeToString(a[:]) + " train\n"
	sum := sha256.Sum256([]byte(text))
	if want := hex.EncodeToString(sum[:]); h1 != want {
		t.Fatalf("hash %s, want %s", h1, want)
	}
	if h3 := versionHash("preference", cfg, []hashedItem{{a, "validation"}, {b, "train"}}); h3 == h1 {
		t.Fatal("moving items between splits did not change the hash")
	}
	if h4 := versionHash("preference", SplitConfig{Strategy: "random", ValidationPercent: 20, Seed: 43}, []hashedItem{{a, "train"}, {b, "validation"}}); h4 == h1 {
		t.Fatal("the seed is not part of the hash")
	}
}

func TestFeedbackExample(t *testing.T) {
	ctx := string(`{"documents":["d"],"messages":[{"role":"system","content":"You help with AOMA."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"How do I deploy?"}]}`)
	got, err := feedbackExample("How do I deploy?", "Click deploy.", "Open Deployments > New, pick the build, confirm.", "corrected", ctx, "default system")
	if err != nil {
		t.Fatal(err)
	}
	want := Example{System: "You help with AOMA.", Messages: []export.Message{
		{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello!"},
		{Role: "user", Content: "How do I deploy?"}, {Role: "assistant", Content: "Open Deployments > New, pick the build, confirm."},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	// Approved: the response is the reply; the dataset's system prompt
	// fills in when the context has none.
	got, _ = feedbackExample("Q", "A", "", "approved", `{}`, "default system")
	want = Example{System: "default system", Messages: []export.Message{{Role: "user", Content: "Q"}, {Role: "assistant", Content: "A"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("approved: got %+v", got)
	}
}

func TestMasked(t *testing.T) {
	e := Example{Prompt: []export.Message{{Role: "user", Content: "mail me at ada@example.com"}}, Chosen: "call +44 20 7946 0958", Rejected: "no"}
	m := e.Masked()
	if m.Prompt[0].Content != "mail me at [EMAIL]" || m.Chosen != "call [PHONE]" {
		t.Fatalf("masked: %+v", m)
	}
	if e.Prompt[0].Content != "mail me at ada@example.com" {
		t.Fatal("Masked changed its receiver")
	}
}

// Stored content, as Postgres writes jsonb back as text, decodes the same
// with the fast decoder as with encoding/json: escapes, non-ASCII text,
// keys in Postgres's order, empty and missing fields.
func TestDecodeExample(t *testing.T) {
	for _, raw := range []string{
		`{"chosen": "4", "prompt": [{"role": "user", "content": "<b>2+2</b>?"}], "system": "Be brief.", "rejected": "5"}`,
		`{"system": "", "messages": [{"role": "user", "content": "caf\u00e9 \"quoted\" \\ back\nline\ttab \u2028 \ud83d\ude00"}, {"role": "assistant", "content": "日本語 — ok"}]}`,
		`{"system": "x", "messages": []}`,
		`{"prompt": [], "chosen": "", "rejected": "b", "system": "s"}`,
	} {
		var want, got Example
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		if err := decodeExample([]byte(raw), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s\n got %#v\nwant %#v", raw, got, want)
		}
	}
	var e Example
	if err := decodeExample([]byte(`{"system": `), &e); err == nil {
		t.Error("truncated content decoded")
	}
}
