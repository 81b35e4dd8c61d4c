package auth

import (
	"strings"
	"testing"
)

func TestPasswordRoundTrip(t *testing.T) {
	hash, err := HashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("unexpected hash format %q", hash)
	}
	for pw, want := range map[string]bool{"correct horse battery": true, "correct horse batterY": false, "": false} {
		ok, err := VerifyPassword(hash, pw)
		if err != nil || ok != want {
			t.Errorf("VerifyPassword(%q) = %v, %v; want %v", pw, ok, err, want)
		}
	}
	other, _ := HashPassword("correct horse battery")
	if other == hash {
		t.Error("two hashes of one password are equal: salt not random")
	}
}

func TestPasswordStrength(t *testing.T) {
	for _, pw := range []string{"", "short", "elevenchars", strings.Repeat("x", 257)} {
		if CheckPasswordStrength(pw) == nil {
			t.Errorf("accepted %q", pw)
		}
	}
	// Twelve characters, counted as characters, not bytes.
	if err := CheckPasswordStrength("ééééééééééé"); err == nil {
		t.Error("accepted 11 two-byte characters")
	}
	if err := CheckPasswordStrength("twelve chars"); err != nil {
		t.Error(err)
	}
}

func TestAPIKey(t *testing.T) {
	full, prefix, hash := NewAPIKey()
	p, h, err := ParseAPIKey(full)
	if err != nil || p != prefix || !HashMatches(h, hash) {
		t.Fatalf("ParseAPIKey(%q) = %q, %x, %v", full, p, h, err)
	}
	tampered := full[:len(full)-1] + "a"
	if full[len(full)-1] == 'a' {
		tampered = full[:len(full)-1] + "b"
	}
	if _, h2, _ := ParseAPIKey(tampered); HashMatches(h2, hash) {
		t.Error("tampered key matches")
	}
	for _, bad := range []string{"", "cur_", "cur_abc_def", "xyz_" + full[4:], full + "_x"} {
		if _, _, err := ParseAPIKey(bad); err == nil {
			t.Errorf("ParseAPIKey(%q) accepted", bad)
		}
	}
}

func TestRoles(t *testing.T) {
	cases := []struct {
		have, need Role
		want       bool
	}{
		{Admin, Viewer, true}, {Admin, Admin, true}, {Curator, Admin, false},
		{Viewer, Curator, false}, {Curator, Curator, true}, {Role("root"), Viewer, false},
	}
	for _, c := range cases {
		if got := c.have.AtLeast(c.need); got != c.want {
			t.Errorf("%s.AtLeast(%s) = %v", c.have, c.need, got)
		}
	}
	if _, err := ParseRole("owner"); err == nil {
		t.Error("ParseRole accepted owner")
	}
}
