// Package s3test starts a real S3-compatible server for a test: SeaweedFS
// (`weed server -s3`: a master, a volume server, a filer and its S3
// gateway in one process) on free loopback ports in a temporary directory,
// with one identity whose requests it checks the signatures of, stopped
// when the test ends.
//
// The server's binary is named by CURATE_S3_SERVER, which `make test` sets
// after building it once with scripts/s3server.sh. Without the setting the
// script is run to find the cached binary or build it (minutes, once),
// except under CI=true, where the missing setting is a failure: CI builds
// the binary before its tests.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Region is the region every bucket URL names; SeaweedFS accepts any.
const Region = "us-east-1"

// Server is a running SeaweedFS server with its S3 gateway.
type Server struct {
	// Endpoint is the S3 gateway's address, http://127.0.0.1:<port>.
	Endpoint             string
	AccessKey, SecretKey string
	// Client speaks to the gateway as the server's identity, for a test
	// to look into a bucket beside the code under test.
	Client *s3.Client
	dir    string
}

// Start starts a server for t, stopped when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := binary(t)
	dir, err := os.MkdirTemp("", "curate-s3-") // short: the filer's and gateway's sockets live here
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Server{AccessKey: "curate" + randomHex(6), SecretKey: randomHex(20), dir: dir}
	if err := s.writeConfig(); err != nil {
		t.Fatal(err)
	}
	// The ports are free when chosen and taken by the server a moment
	// later; another process may take one in between, so a server that
	// exits at once is started again on other ports.
	var last error
	for range 3 {
		cmd, ports, err := s.launch(bin)
		if err != nil {
			t.Fatal(err)
		}
		endpoint := "http://127.0.0.1:" + strconv.Itoa(ports[6])
		grpcPorts := []int{ports[1], ports[3], ports[5], ports[7]}
		s.Endpoint = endpoint
		s.Client = s3.New(s3.Options{
			Region:       Region,
			BaseEndpoint: aws.String(endpoint),
			UsePathStyle: true,
			Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		})
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if last = s.ready(exited); last == nil {
			t.Cleanup(func() {
				stop(cmd, exited, grpcPorts)
				if t.Failed() {
					t.Logf("s3test: the server's log ends:\n%s", s.logTail())
				}
			})
			return s
		}
		stop(cmd, exited, grpcPorts)
	}
	t.Fatalf("s3test: SeaweedFS (%s) did not start: %v\n%s", bin, last, s.logTail())
	return nil
}

// Bucket creates a bucket and returns the CURATE_BLOB_URL that names it.
// The server's credentials are set in t's environment, where the blob
// store finds them as a deployment's servers would (AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY); t must therefore not be parallel.
func (s *Server) Bucket(t testing.TB, name string) string {
	t.Helper()
	if _, err := s.Client.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("s3test: creating bucket %s: %v", name, err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	return s.URL(name)
}

// URL is the blob store URL of bucket on this server: path-style requests
// to the gateway's endpoint, as for any S3-compatible server.
func (s *Server) URL(bucket string) string {
	return "s3://" + bucket + "?region=" + Region + "&use_path_style=true&endpoint=" + s.Endpoint
}

// Keys lists the keys in bucket under prefix, straight from the server.
func (s *Server) Keys(t testing.TB, bucket, prefix string) []string {
	t.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.Client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("s3test: listing %s/%s: %v", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	slices.Sort(keys)
	return keys
}

// binary finds the server's binary: CURATE_S3_SERVER, or what
// scripts/s3server.sh finds or builds.
func binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("CURATE_S3_SERVER"); p != "" {
		if fi, err := os.Stat(p); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			t.Fatalf("s3test: CURATE_S3_SERVER=%s is not an executable file", p)
		}
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("s3test: CURATE_S3_SERVER is not set; CI builds SeaweedFS with scripts/s3server.sh and make test sets it")
	}
	script, err := findScript()
	if err != nil {
		t.Fatalf("s3test: CURATE_S3_SERVER is not set and %v", err)
	}
	t.Logf("s3test: CURATE_S3_SERVER is not set; running %s (a first build takes minutes)", script)
	var stderr bytes.Buffer
	cmd := exec.Command("bash", script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("s3test: %s: %v\n%s", script, err, stderr.String())
	}
	p := strings.TrimSpace(string(out))
	if i := strings.LastIndexByte(p, '\n'); i >= 0 {
		p = p[i+1:]
	}
	return p
}

// findScript finds scripts/s3server.sh in the module that holds the
// working directory (a package's tests run in its directory).
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "scripts", "s3server.sh")
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("the module has no scripts/s3server.sh")
			}
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}

// writeConfig writes the gateway's identities: one, allowed everything,
// whose requests must carry a valid signature.
func (s *Server) writeConfig() error {
	cfg := map[string]any{"identities": []any{map[string]any{
		"name":        "curate",
		"credentials": []any{map[string]string{"accessKey": s.AccessKey, "secretKey": s.SecretKey}},
		"actions":     []string{"Admin", "Read", "Write", "List", "Tagging"},
	}}}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.dir, "s3.json"), b, 0o600)
}

// launch starts `weed server -s3` on fresh ports and returns it with the
// ports: the master's, the volume server's, the filer's and the gateway's,
// each followed by its gRPC port. Everything listens on loopback, data
// lives in the temporary directory, and nothing reports to outside
// servers.
func (s *Server) launch(bin string) (*exec.Cmd, []int, error) {
	ports, err := freePorts(8)
	if err != nil {
		return nil, nil, err
	}
	data := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, nil, err
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "weed.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, err
	}
	defer log.Close()
	p := func(i int) string { return strconv.Itoa(ports[i]) }
	cmd := exec.Command(bin, "server",
		"-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-dir="+data,
		"-master.port="+p(0), "-master.port.grpc="+p(1),
		"-volume.port="+p(2), "-volume.port.grpc="+p(3),
		"-filer", "-filer.port="+p(4), "-filer.port.grpc="+p(5),
		"-filer.localSocket="+filepath.Join(s.dir, "filer.sock"),
		"-s3", "-s3.port="+p(6), "-s3.port.grpc="+p(7),
		"-s3.localSocket="+filepath.Join(s.dir, "s3.sock"),
		"-s3.config="+filepath.Join(s.dir, "s3.json"),
		"-s3.port.iceberg=0", "-s3.port.lance=0",
		"-master.telemetry=false", "-master.volumeSizeLimitMB=64", "-volume.max=16",
	)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = dieWithParent()
	// No AWS settings of ours: the server's identities are its config's.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "AWS_") })
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	return cmd, ports, nil
}

// ready waits until the gateway stores and deletes an object (the volume
// server has joined the master and a volume was grown), or the server
// exits, or a minute has passed.
func (s *Server) ready(exited <-chan error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const probe = "curate-s3test-ready"
	var last error
	for {
		last = s.probe(ctx, probe)
		if last == nil {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the server exited: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("no answer in a minute: %v", last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *Server) probe(ctx context.Context, bucket string) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := s.Client.CreateBucket(rctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return err
	}
	key := aws.String("probe")
	if _, err := s.Client.PutObject(rctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: key, Body: strings.NewReader("ok")}); err != nil {
		return err
	}
	if _, err := s.Client.DeleteObject(rctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: key}); err != nil {
		return err
	}
	_, err = s.Client.DeleteBucket(rctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	return err
}

// stop kills the server outright: what it stored is thrown away with its
// directory, and a graceful stop takes its filer 15 seconds (it retries
// flushing its log to the volume server, which stopped first). The gRPC
// sockets it made in /tmp under its ports, which a clean stop would have
// removed, are removed here.
func stop(cmd *exec.Cmd, exited <-chan error, grpcPorts []int) {
	_ = cmd.Process.Kill()
	<-exited
	for _, port := range grpcPorts {
		socks, _ := filepath.Glob("/tmp/seaweedfs-*-grpc-" + strconv.Itoa(port) + ".sock")
		for _, sock := range socks {
			_ = os.Remove(sock)
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "weed.log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
