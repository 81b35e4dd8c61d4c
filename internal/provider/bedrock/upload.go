package bedrock

import (
	"context"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/curate/curate/internal/provider"
)

// formats are the export formats Bedrock trains on.
var formats = []string{"bedrock_chat"}

// maxFileBytes is the most S3 takes in a single PUT.
const maxFileBytes = 5 << 30

// Upload puts the files at s3://<bucket>/<prefix>/<curate job id>/train.jsonl
// and validation.jsonl. An object already there with the file's size is an
// earlier upload of the same file and is kept rather than sent again.
func (p *Provider) Upload(ctx context.Context, req provider.UploadRequest) (provider.UploadResult, error) {
	if err := req.Check(maxFileBytes, formats...); err != nil {
		return provider.UploadResult{}, err
	}
	var res provider.UploadResult
	var err error
	if res.TrainFileID, err = p.put(ctx, p.key(req.CurateJobID, "train.jsonl"), req.TrainPath); err != nil {
		return provider.UploadResult{}, err
	}
	if req.ValidPath != "" {
		if res.ValidFileID, err = p.put(ctx, p.key(req.CurateJobID, "validation.jsonl"), req.ValidPath); err != nil {
			return provider.UploadResult{}, err
		}
	}
	return res, nil
}

func (p *Provider) put(ctx context.Context, key, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	head, err := p.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(p.bucket), Key: aws.String(key)})
	switch {
	case err == nil && aws.ToInt64(head.ContentLength) == info.Size():
		return p.uri(key), nil
	case err != nil && !notFound(err):
		return "", fail("look for "+p.uri(key), err)
	}
	// An *os.File can be read again from the start, so the SDK can sign,
	// checksum and retry the upload.
	_, err = p.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        aws.String(p.bucket),
		Key:           aws.String(key),
		Body:          f,
		ContentLength: aws.Int64(info.Size()),
		ContentType:   aws.String("application/jsonl"),
	})
	if err != nil {
		return "", fail("upload "+p.uri(key), err)
	}
	return p.uri(key), nil
}

// WaitUploaded checks that the objects are there. S3 serves an object as
// soon as its PUT returns, so there is nothing to wait for.
func (p *Provider) WaitUploaded(ctx context.Context, files provider.UploadResult) (bool, error) {
	for _, uri := range []string{files.TrainFileID, files.ValidFileID} {
		if uri == "" {
			continue
		}
		bucket, key, err := splitURI(uri)
		if err != nil {
			return false, err
		}
		if _, err := p.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}); err != nil {
			return false, fail("look for "+uri, err)
		}
	}
	return true, nil
}
