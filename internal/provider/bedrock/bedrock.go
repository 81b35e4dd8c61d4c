// Package bedrock runs Curate's fine-tuning jobs as Amazon Bedrock model
// customization jobs, through the AWS SDK.
//
// Files go to S3 under s3://<bucket>/<prefix>/<curate job id>/ and the job
// writes its output beside them. Curate's job id names everything made for
// it: the object keys, the job name ("curate-<id>") and the job's client
// request token, so a worker that crashed between a call and storing its
// answer finds what it made instead of making it twice.
package bedrock

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrock"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/curate/curate/internal/provider"
)

// Name is the provider's name in Curate.
const Name = "bedrock"

// Config holds the settings.
type Config struct {
	Bucket  string // S3 bucket for training files and job output; required
	Prefix  string // key prefix inside the bucket, e.g. "curate/fine-tuning"
	RoleARN string // service role Bedrock assumes to read and write the bucket; required

	// Region overrides AWS_REGION and the shared config.
	Region string
	// BedrockEndpoint and S3Endpoint override the services' endpoints.
	BedrockEndpoint string
	S3Endpoint      string
	// S3PathStyle addresses objects as <endpoint>/<bucket>/<key>, as
	// S3-compatible stores and test servers need.
	S3PathStyle bool

	// AWS is a ready SDK configuration (credentials, retryer, HTTP
	// client). When nil the SDK's default chain is loaded: environment,
	// shared files, SSO, instance roles.
	AWS *aws.Config
}

// Provider talks to Bedrock's control plane and to S3.
type Provider struct {
	bedrock *bedrock.Client
	s3      *s3.Client
	bucket  string
	prefix  string
	roleARN string
}

var _ provider.Provider = (*Provider)(nil)

// New builds the provider. It fails when the bucket, role, region or AWS
// credentials are missing, rather than letting the first paid call fail.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("bedrock: no S3 bucket configured")
	}
	if !strings.HasPrefix(cfg.RoleARN, "arn:") {
		return nil, errors.New("bedrock: no service role ARN configured (arn:aws:iam::<account>:role/<name>)")
	}
	var awsCfg aws.Config
	if cfg.AWS != nil {
		awsCfg = cfg.AWS.Copy()
	} else {
		var err error
		if awsCfg, err = config.LoadDefaultConfig(ctx); err != nil {
			return nil, fmt.Errorf("bedrock: load AWS configuration: %w", err)
		}
	}
	if cfg.Region != "" {
		awsCfg.Region = cfg.Region
	}
	if awsCfg.Region == "" {
		return nil, errors.New("bedrock: no AWS region: set AWS_REGION or configure one")
	}
	if awsCfg.Credentials == nil {
		return nil, errors.New("bedrock: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE")
	}
	if _, err := awsCfg.Credentials.Retrieve(ctx); err != nil {
		return nil, fmt.Errorf("bedrock: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE: %w", err)
	}
	return &Provider{
		bedrock: bedrock.NewFromConfig(awsCfg, func(o *bedrock.Options) {
			if cfg.BedrockEndpoint != "" {
				o.BaseEndpoint = aws.String(cfg.BedrockEndpoint)
			}
		}),
		s3: s3.NewFromConfig(awsCfg, func(o *s3.Options) {
			if cfg.S3Endpoint != "" {
				o.BaseEndpoint = aws.String(cfg.S3Endpoint)
			}
			o.UsePathStyle = cfg.S3PathStyle
		}),
		bucket:  cfg.Bucket,
		prefix:  strings.Trim(cfg.Prefix, "/"),
		roleARN: cfg.RoleARN,
	}, nil
}

// Name returns "bedrock".
func (p *Provider) Name() string { return Name }

// key is the object key of a file belonging to a Curate job.
func (p *Provider) key(curateJobID, name string) string {
	return path.Join(p.prefix, curateJobID, name)
}

func (p *Provider) uri(key string) string { return "s3://" + p.bucket + "/" + key }

// splitURI splits "s3://bucket/key" into bucket and key.
func splitURI(uri string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(uri, "s3://")
	bucket, key, _ = strings.Cut(rest, "/")
	if !ok || bucket == "" {
		return "", "", fmt.Errorf("bedrock: %q is not an s3:// URI", uri)
	}
	return bucket, key, nil
}

// fail turns an SDK error into a *provider.Error with the service's code
// and message.
func fail(op string, err error) error {
	if err == nil {
		return nil
	}
	pe := &provider.Error{Provider: Name, Op: op, Err: err}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		pe.Code, pe.Message = apiErr.ErrorCode(), apiErr.ErrorMessage()
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) {
		pe.StatusCode = respErr.HTTPStatusCode()
		pe.Permanent = provider.PermanentStatus(pe.StatusCode) && !strings.Contains(pe.Code, "Throttl")
	}
	return pe
}

// notFound reports whether err is S3's answer for a missing object.
func notFound(err error) bool {
	var respErr *awshttp.ResponseError
	return errors.As(err, &respErr) && respErr.HTTPStatusCode() == 404
}
