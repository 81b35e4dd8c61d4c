package handlers

import "testing"

func TestNULField(t *testing.T) {
	for body, want := range map[string]string{
		`{"query":"a\u0000b"}`:                                "query",
		`{"items":[{"query":"ok"},{"tags":["x","y\u0000"]}]}`: "items[1].tags[1]",
		`{"context":{"documents":[{"text":"\u0000"}]}}`:       "context.documents[0].text",
		`{"a":1,"b":[1,[2,3],{"c":"\u0000"}]}`:                "b[2].c",
		`"\u0000"`:                                            "body",
		`{"k\u0000":1}`:                                       "k\x00",
	} {
		got, ok := nulField([]byte(body))
		if want == "k\x00" {
			if !ok {
				t.Errorf("%s: a NUL in a key not found", body)
			}
			continue
		}
		if !ok || got != want {
			t.Errorf("nulField(%s) = %q, %v; want %q", body, got, ok, want)
		}
	}
	if f, ok := nulField([]byte(`{"text":"a\\u0000 is how JSON writes NUL"}`)); ok {
		t.Errorf("an escaped backslash was taken for a NUL at %s", f)
	}
}

// A body that embeds another struct names a bad field by its JSON path
// alone: encoding/json puts the embedded struct's Go name in the path.
func TestJSONErrFieldInEmbeddedStruct(t *testing.T) {
	type inner struct {
		Strength float64 `json:"preference_strength"`
		Nested   struct {
			Count int `json:"count"`
		} `json:"nested"`
	}
	var body struct {
		inner
		Extra string `json:"extra"`
	}
	for in, want := range map[string]string{
		`{"preference_strength": "high"}`: "preference_strength",
		`{"nested": {"count": "x"}}`:      "nested.count",
		`{"extra": 1}`:                    "extra",
		`{"bogus": 1}`:                    "bogus",
	} {
		if got := bodyField(strictUnmarshal([]byte(in), &body), &body); got != want {
			t.Errorf("%s: field %q, want %q", in, got, want)
		}
	}
}
