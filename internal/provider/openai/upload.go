package openai

import (
	"context"
	"fmt"
	"os"

	sdk "github.com/openai/openai-go/v3"

	"github.com/curate/curate/internal/provider"
)

// formats are the export formats OpenAI trains on: chat examples for
// supervised jobs and preference pairs for DPO.
var formats = []string{"openai_chat", "openai_preference"}

// recentFiles is how many of the newest fine-tune files Upload looks
// through for an earlier upload of the same file. A retry follows its crash
// by minutes, so the earlier upload is among the newest.
const recentFiles = 100

// Upload sends the files with purpose fine-tune. A file already uploaded
// for this Curate job, found by its name among the newest files or by the
// create's idempotency key, is adopted instead of sent again.
func (p *Provider) Upload(ctx context.Context, req provider.UploadRequest) (provider.UploadResult, error) {
	if err := req.Check(maxFileBytes, formats...); err != nil {
		return provider.UploadResult{}, err
	}
	var res provider.UploadResult
	var err error
	if res.TrainFileID, err = p.uploadOne(ctx, req.CurateJobID, "train", req.TrainPath); err != nil {
		return provider.UploadResult{}, err
	}
	if req.ValidPath != "" {
		if res.ValidFileID, err = p.uploadOne(ctx, req.CurateJobID, "valid", req.ValidPath); err != nil {
			return provider.UploadResult{}, err
		}
	}
	return res, nil
}

func (p *Provider) uploadOne(ctx context.Context, curateJobID, role, path string) (string, error) {
	name := fmt.Sprintf("curate-%s-%s.jsonl", curateJobID, role)
	if id, found, err := p.findFile(ctx, name); err != nil || found {
		return id, err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	obj, err := p.client.Files.New(ctx, sdk.FileNewParams{
		File:    sdk.File(f, name, "application/jsonl"),
		Purpose: sdk.FilePurposeFineTune,
	}, idempotencyKey(curateJobID, role+"-file"))
	if err != nil {
		return "", fail("upload "+role+" file", err)
	}
	return obj.ID, nil
}

// findFile looks for a usable fine-tune file with this name among the
// newest ones.
func (p *Provider) findFile(ctx context.Context, name string) (string, bool, error) {
	page, err := p.client.Files.List(ctx, sdk.FileListParams{
		Purpose: sdk.String(string(sdk.FilePurposeFineTune)),
		Limit:   sdk.Int(recentFiles),
		Order:   sdk.FileListParamsOrderDesc,
	})
	if err != nil {
		return "", false, fail("list files", err)
	}
	for _, f := range page.Data {
		if status, _ := fileStatus(&f); f.Filename == name && status != sdk.FileObjectStatusError {
			return f.ID, true, nil
		}
	}
	return "", false, nil
}

// WaitUploaded reports whether OpenAI has processed both files. A file
// it could not process is a permanent error carrying OpenAI's reason.
func (p *Provider) WaitUploaded(ctx context.Context, files provider.UploadResult) (bool, error) {
	ready := true
	for _, id := range []string{files.TrainFileID, files.ValidFileID} {
		if id == "" {
			continue
		}
		f, err := p.client.Files.Get(ctx, id)
		if err != nil {
			return false, fail("get file", err)
		}
		switch status, details := fileStatus(f); status {
		case sdk.FileObjectStatusError:
			return false, &provider.Error{Provider: Name, Op: "process file " + id, Message: details, Permanent: true}
		case sdk.FileObjectStatusProcessed:
		default:
			ready = false
		}
	}
	return ready, nil
}

// fileStatus returns a file's processing status and, for "error", the
// reason. The API marks both fields deprecated but still reports them, and
// they are its only word on a file it could not process.
func fileStatus(f *sdk.FileObject) (sdk.FileObjectStatus, string) {
	//lint:ignore SA1019 still reported, and the only sign of a file OpenAI refused
	return f.Status, f.StatusDetails
}
