package leak_test

import (
	"strings"
	"testing"

	"github.com/curate/curate/internal/leak"
)

func TestCheck(t *testing.T) {
	long := "To reset your password open the sign in page and choose forgot password then enter the address of your account and we send a link that works for thirty minutes"
	training := []string{
		"Short answer with nothing in it.",
		long,
		"Write to jane.doe@example.com or call +44 20 7946 0958 for a refund.",
	}
	ix := leak.New(training, []string{"My card is 4111 1111 1111 1111"}, 10)
	cases := []struct {
		name   string
		answer string
		words  int
		pii    string
	}{
		{"clean", "Open the settings page and pick a new password.", 0, ""},
		{"verbatim run", "Sure! " + long + ". Anything else?", len(strings.Fields(long)), ""},
		{"a run of twelve", "So: open the sign in page and choose forgot password then enter the form.", 12, ""},
		{"nine words is not a leak", "open the sign in page and choose forgot password", 0, ""},
		{"punctuation does not hide it, case ends it", "open the sign-in page, and choose: forgot password; then enter THE", 11, ""},
		{"training e-mail", "Contact jane.doe@example.com please.", 0, "EMAIL"},
		{"other e-mail", "Contact john@example.org please.", 0, ""},
		{"a prompt's card number", "Your card 4111 1111 1111 1111 is on file.", 0, "CARD"},
	}
	for _, c := range cases {
		f := ix.Check("a question", c.answer)
		if f.Words != c.words || strings.Join(f.PII, ",") != c.pii {
			t.Errorf("%s: %+v, want %d words and PII %q", c.name, f, c.words, c.pii)
		}
		if f.Leaked() != (c.words > 0 || c.pii != "") {
			t.Errorf("%s: leaked %v", c.name, f.Leaked())
		}
	}
	if f := ix.Check("", "Sure! "+long); f.Source != 1 || !strings.Contains(f.Explain(10), "repeats 30 words") {
		t.Errorf("source %d, %q", f.Source, f.Explain(10))
	}
	if f := ix.Check("I am jane.doe@example.com", "Hello jane.doe@example.com."); f.Leaked() {
		t.Errorf("the asker's own address counted: %+v", f)
	}
	if leak.New(nil, nil, 3).MinWords() != 8 {
		t.Error("runs shorter than 8 words are counted")
	}
}
