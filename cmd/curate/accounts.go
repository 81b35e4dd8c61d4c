package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/audit"
	"github.com/curate/curate/internal/auth"
	"github.com/curate/curate/internal/errs"
)

var cliActor = audit.Actor{Kind: "system", Label: "cli"}

func cmdUser(ctx context.Context, env *Env, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := newFlags(env, "user", "user create --org SLUG --email E --role viewer|curator|admin [--name N]",
		"Creates a user, and the organisation if it does not exist yet. The password is read\n"+
			"from standard input when it is piped in; otherwise one is generated and printed once.")
	org := fs.String("org", "", "organisation slug (created when missing)")
	email := fs.String("email", "", "the user's e-mail address, used to sign in")
	role := fs.String("role", "curator", "viewer, curator or admin")
	name := fs.String("name", "", "display name")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "data directory (CURATE_DATA_DIR)")
	if len(args) == 0 || args[0] != "create" {
		fs.Usage()
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return errors.New("user needs a subcommand: create")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *org == "" || *email == "" {
		return errors.New("--org and --email are required")
	}
	if _, err := auth.ParseRole(*role); err != nil {
		return err
	}
	password, generated, err := readPassword(env)
	if err != nil {
		return err
	}
	svc, closeDB, err := openServices(ctx, cfg, env)
	if err != nil {
		return err
	}
	defer closeDB()
	acc := svc.Accounts
	o, err := acc.EnsureOrg(ctx, *org, "")
	if err != nil {
		return cliError(err)
	}
	u, err := acc.CreateUser(ctx, cliActor, o.ID, accounts.NewUser{Email: *email, Name: *name, Role: *role, Password: password})
	if err != nil {
		return cliError(err)
	}
	fmt.Fprintf(env.Stdout, "created %s (%s) in %s\n", u.Email, u.Role, o.Slug)
	if generated {
		fmt.Fprintf(env.Stdout, "password: %s\n(shown once)\n", password)
	}
	return nil
}

// readPassword takes the first line of piped standard input, or generates
// a password when standard input is a terminal or empty.
func readPassword(env *Env) (pw string, generated bool, err error) {
	if f, ok := env.Stdin.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return auth.GeneratePassword(), true, nil
		}
	}
	line, err := bufio.NewReader(env.Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", false, fmt.Errorf("reading the password from standard input: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return auth.GeneratePassword(), true, nil
	}
	if err := auth.CheckPasswordStrength(line); err != nil {
		return "", false, err
	}
	return line, false, nil
}

func cmdAPIKey(ctx context.Context, env *Env, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := newFlags(env, "apikey", "apikey create --org SLUG --name N --role viewer|curator|admin",
		"Creates an API key for programs calling /api/... (Authorization: Bearer <key>).\n"+
			"The key is printed once; only its hash is stored.")
	org := fs.String("org", "", "organisation slug")
	name := fs.String("name", "", "what the key is for, e.g. \"assistant backend\"")
	role := fs.String("role", "curator", "viewer, curator or admin")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "data directory (CURATE_DATA_DIR)")
	if len(args) == 0 || args[0] != "create" {
		fs.Usage()
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return errors.New("apikey needs a subcommand: create")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *org == "" || *name == "" {
		return errors.New("--org and --name are required")
	}
	svc, closeDB, err := openServices(ctx, cfg, env)
	if err != nil {
		return err
	}
	defer closeDB()
	acc := svc.Accounts
	o, err := acc.OrgBySlug(ctx, *org)
	if err != nil {
		return cliError(err)
	}
	k, secret, err := acc.CreateAPIKey(ctx, cliActor, o.ID, accounts.NewKey{Name: *name, Role: *role})
	if err != nil {
		return cliError(err)
	}
	fmt.Fprintf(env.Stdout, "created API key %q (%s) in %s\n%s\n(shown once: only its hash is stored)\n", k.Name, k.Role, o.Slug, secret)
	return nil
}

// cliError words validation errors for a terminal: "--email: ...".
func cliError(err error) error {
	var invalid *errs.Invalid
	if !errors.As(err, &invalid) {
		return err
	}
	parts := make([]string, len(invalid.Errors))
	for i, f := range invalid.Errors {
		parts[i] = "--" + f.Field + ": " + f.Message
	}
	return errors.New(strings.Join(parts, "; "))
}
