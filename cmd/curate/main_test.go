package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/curate/curate/db/pgtest"
	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/export"
	"github.com/curate/curate/internal/imports"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func runCLI(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := &Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut}
	err := run(context.Background(), env, args)
	return out.String(), errOut.String(), err
}

func TestHelp(t *testing.T) {
	out, _, err := runCLI(t, "", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"serve", "worker", "migrate", "devdb", "user", "apikey"} {
		if !strings.Contains(out, "  "+cmd+" ") {
			t.Errorf("--help does not list %s", cmd)
		}
	}
	for _, cmd := range [][]string{{"serve", "--help"}, {"worker", "--help"}, {"devdb", "--help"}, {"user", "--help"}, {"apikey", "--help"}} {
		_, stderr, _ := runCLI(t, "", cmd...)
		if !strings.Contains(stderr, "Usage: curate "+cmd[0]) {
			t.Errorf("%s --help: %q", cmd[0], stderr)
		}
	}
	if _, _, err := runCLI(t, "", "frobnicate"); err == nil {
		t.Error("unknown command accepted")
	}
}

// Every command's help is what the code does: each command is listed and
// has its own usage, and the import and export helps name every kind and
// format the code takes (the import summary once said only jsonl and
// oasst).
func TestHelpMatchesTheCode(t *testing.T) {
	out, _, err := runCLI(t, "", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands() {
		if !strings.Contains(out, "  "+c.name+" ") {
			t.Errorf("--help does not list %s", c.name)
		}
		_, stderr, _ := runCLI(t, "", c.name, "--help")
		if !strings.Contains(stderr, "Usage: curate "+c.name) {
			t.Errorf("%s --help: %q", c.name, stderr)
		}
	}
	summary := out[strings.Index(out, "  import "):]
	summary = summary[:strings.Index(summary, "\n")]
	_, importHelp, _ := runCLI(t, "", "import", "--help")
	for _, kind := range imports.Kinds {
		if !strings.Contains(summary, kind) {
			t.Errorf("the import summary %q does not name %s", summary, kind)
		}
		if !strings.Contains(importHelp, kind) {
			t.Errorf("import --help does not name %s", kind)
		}
	}
	_, exportHelp, _ := runCLI(t, "", "export", "--help")
	for _, f := range export.Formats() {
		if !strings.Contains(exportHelp, string(f)) {
			t.Errorf("export --help does not name the format %s", f)
		}
	}
}

func TestUserAndKeyCreate(t *testing.T) {
	pool, url := pgtest.NewDBURL(t)
	t.Setenv("DATABASE_URL", url)
	t.Setenv("CURATE_DATA_DIR", t.TempDir())

	out, _, err := runCLI(t, "a-piped-password-1\n", "user", "create", "--org", "acme", "--email", "ada@acme.test", "--role", "admin")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "created ada@acme.test (admin) in acme") || strings.Contains(out, "password:") {
		t.Fatalf("output %q", out)
	}
	acc := accounts.New(pool, accounts.DefaultSessionTTL)
	if _, err := acc.SignIn(context.Background(), accounts.Credentials{Email: "ada@acme.test", Password: "a-piped-password-1", IP: "127.0.0.1"}); err != nil {
		t.Fatalf("sign in with the piped password: %v", err)
	}

	// No password piped: one is generated and printed once.
	out, _, err = runCLI(t, "", "user", "create", "--org", "acme", "--email", "bob@acme.test", "--role", "viewer")
	if err != nil {
		t.Fatal(err)
	}
	pw := regexp.MustCompile(`password: (\S+)`).FindStringSubmatch(out)
	if pw == nil {
		t.Fatalf("no generated password in %q", out)
	}
	if _, err := acc.SignIn(context.Background(), accounts.Credentials{Email: "bob@acme.test", Password: pw[1], IP: "127.0.0.1"}); err != nil {
		t.Fatalf("sign in with the generated password: %v", err)
	}

	for _, bad := range [][]string{
		{"user", "create", "--org", "acme", "--email", "ada@acme.test", "--role", "viewer"}, // duplicate
		{"user", "create", "--org", "acme", "--email", "c@acme.test", "--role", "owner"},    // unknown role
		{"user", "create", "--org", "Bad Slug", "--email", "d@acme.test"},                   // bad org
	} {
		if _, _, err := runCLI(t, "another-password-1\n", bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if _, _, err := runCLI(t, "short\n", "user", "create", "--org", "acme", "--email", "e@acme.test"); err == nil {
		t.Error("weak piped password accepted")
	}

	out, _, err = runCLI(t, "", "apikey", "create", "--org", "acme", "--name", "backend", "--role", "curator")
	if err != nil {
		t.Fatal(err)
	}
	key := regexp.MustCompile(`(cur_[a-z0-9]+_[a-z0-9]+)`).FindString(out)
	k, err := acc.KeyCaller(context.Background(), key)
	if err != nil || k.Name != "backend" || auth.Role(k.Role) != auth.Curator {
		t.Fatalf("the printed key does not authenticate: %v %+v", err, k)
	}
	var stored []byte
	if err := pool.QueryRow(context.Background(), "SELECT secret_hash FROM api_keys WHERE id = $1", k.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(stored, []byte(key)) || len(stored) != 32 {
		t.Fatal("the key is stored in clear")
	}
	if _, _, err := runCLI(t, "", "apikey", "create", "--org", "nope", "--name", "x"); err == nil {
		t.Error("key for a missing organisation accepted")
	}
}
