package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/curate/curate/internal/accounts"
	"github.com/curate/curate/internal/imports"
	"github.com/curate/curate/internal/pairs"
)

// runPairImport imports a file of preference pairs (HH-RLHF, OASST ranked
// siblings, or Curate's own TRL or OpenAI preference export; plain or gzip)
// into the organisation, all or nothing, showing progress over the file's
// bytes, then prints what was stored, what was there already and what was
// skipped and why.
func runPairImport(ctx context.Context, env *Env, d *database, orgSlug, kind, path string) error {
	if !slices.Contains(pairs.ImportKinds, kind) {
		return fmt.Errorf("--kind: must be one of %s, not %q", strings.Join(pairs.ImportKinds, ", "), kind)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", path)
	}
	o, err := accounts.New(d.Pool).OrgBySlug(ctx, orgSlug)
	if err != nil {
		return cliError(err)
	}
	bar := progressbar.NewOptions64(fi.Size(),
		progressbar.OptionSetWriter(env.Stderr),
		progressbar.OptionSetDescription("importing pairs"),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(env.Stderr) }),
	)
	in := imports.WithProgress(f, fi.Size(), func(read, _ int64) { _ = bar.Set64(read) })
	rep, err := (&pairs.Store{Pool: d.Pool}).Import(ctx, cliActor, o.ID, kind, in)
	if err != nil {
		_ = bar.Exit()
		fmt.Fprintln(env.Stderr)
		return fmt.Errorf("import of %s failed, nothing was stored: %w", filepath.Base(path), err)
	}
	_ = bar.Finish()
	fmt.Fprintf(env.Stdout, "imported %s pairs from %s into %s: %d stored, %d already there, %d skipped\n",
		kind, filepath.Base(path), o.Slug, rep.Created, rep.Duplicates, len(rep.Skipped))
	for _, s := range rep.Skipped {
		fmt.Fprintf(env.Stdout, "  line %d skipped: %s\n", s.Line, s.Reason)
	}
	return nil
}
