package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"github.com/schollz/progressbar/v3"

	"github.com/curate/curate/internal/blobstore"
	"github.com/curate/curate/internal/datasets"
)

func cmdDataset(ctx context.Context, env *Env, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := newFlags(env, "dataset", "dataset freeze ID",
		"Freezes a curating dataset: marks it ready and prints the frozen version and its\n"+
			"sha256 content hash. A dataset that is already ready or exported prints its\n"+
			"current version.")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "data directory (CURATE_DATA_DIR)")
	if len(args) == 0 || args[0] != "freeze" {
		fs.Usage()
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return nil
		}
		return errors.New("dataset needs a subcommand: freeze")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("dataset freeze needs one dataset id")
	}
	id, err := uuid.Parse(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("%q is not a dataset id", fs.Arg(0))
	}
	svc, closeDB, err := openServices(ctx, cfg, env)
	if err != nil {
		return err
	}
	defer closeDB()
	org, err := svc.Datasets.OrgOf(ctx, id)
	if err != nil {
		return err
	}
	v, err := svc.Datasets.Freeze(ctx, cliActor, org, id)
	if err != nil {
		return cliError(err)
	}
	fmt.Fprintf(env.Stdout, "version %d\nsha256 %s\nitems %d (train %d, validation %d)\n", v.Number, v.ContentHash, v.ItemCount, v.TrainCount, v.ValidationCount)
	return nil
}

func cmdExport(ctx context.Context, env *Env, args []string) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	fs := newFlags(env, "export", "export --dataset ID --format F --out DIR [--keep-pii]",
		"Writes a ready (or exported) dataset's frozen version to DIR: train and validation files in the\n"+
			"format and manifest.json, the same files an export job stores. The validation report\n"+
			"must have no errors. Personal data is masked unless --keep-pii is given (audited).")
	dataset := fs.String("dataset", "", "dataset id")
	format := fs.String("format", "", "openai_chat, openai_preference, trl_preference, bedrock_chat, anthropic_text, sharegpt, alpaca or parquet")
	out := fs.String("out", "", "output directory (created when missing)")
	keep := fs.Bool("keep-pii", false, "keep personal data unmasked")
	fs.StringVar(&cfg.DataDir, "data-dir", cfg.DataDir, "data directory (CURATE_DATA_DIR)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dataset == "" || *format == "" || *out == "" {
		fs.Usage()
		return errors.New("--dataset, --format and --out are required")
	}
	id, err := uuid.Parse(*dataset)
	if err != nil {
		return fmt.Errorf("--dataset: %q is not a dataset id", *dataset)
	}
	svc, closeDB, err := openServices(ctx, cfg, env)
	if err != nil {
		return err
	}
	defer closeDB()
	org, err := svc.Datasets.OrgOf(ctx, id)
	if err != nil {
		return err
	}
	detail, err := svc.Datasets.Get(ctx, org, id)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	bucket, err := blobstore.OpenDir(dir)
	if err != nil {
		return err
	}
	defer bucket.Close()
	total := int64(0)
	if detail.Current != nil {
		total = int64(detail.Current.ItemCount)
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(env.Stderr),
		progressbar.OptionSetDescription("exporting"),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(env.Stderr) }),
	)
	m, rep, err := svc.Datasets.ExportTo(ctx, cliActor, org, id, datasets.ExportRequest{Format: *format, MaskPII: !*keep, Admin: true}, bucket,
		func(done int) error { return bar.Set64(int64(done)) })
	if err != nil {
		_ = bar.Exit()
		if rep.Report != nil && rep.Blocking() {
			fmt.Fprintf(env.Stderr, "validation report for %s: %d error(s), quality score %.3f\n", *format, rep.Errors, rep.QualityScore)
		}
		return cliError(err)
	}
	_ = bar.Finish()
	for _, f := range m.Files {
		fmt.Fprintf(env.Stdout, "%s\t%d rows\t%d bytes\tsha256 %s\n", filepath.Join(dir, f.Name), f.Rows, f.Bytes, f.SHA256)
	}
	fmt.Fprintf(env.Stdout, "%s\tdataset version %s\n", filepath.Join(dir, datasets.ManifestName), m.DatasetVersion)
	return nil
}
