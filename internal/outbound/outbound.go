// Package outbound is the one HTTP client for every call Curate makes to a
// server a user named: a Langfuse host, an alert webhook, and later vLLM
// servers, judges and deploy hooks. A user who can type a URL must not be
// able to make Curate reach its own network, so:
//
//   - the address is checked after DNS resolution, on the connection itself
//     (a name that resolves to a public address for the check and a private
//     one for the request cannot slip through), and again on every redirect;
//   - loopback, private, shared and unique-local addresses are refused unless
//     the operator lists them (CURATE_OUTBOUND_ALLOW: host names and CIDRs);
//   - link-local addresses, cloud metadata services, multicast and the
//     unspecified address are refused always;
//   - every exchange has a timeout and a cap on the response size;
//   - what the remote server answered is never shown to users: Describe
//     gives the status and a short reason, and the body goes to the log,
//     truncated.
package outbound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults for a Client.
const (
	DefaultTimeout  = 30 * time.Second
	DefaultMaxBody  = 32 << 20
	DefaultRedirect = 5
	// LogBodyLimit bounds the part of a remote answer written to the log.
	LogBodyLimit = 512
)

// Policy says which addresses may be called besides public ones.
type Policy struct {
	// Hosts are host names (lower case, no port) that may resolve to
	// loopback or private addresses.
	Hosts []string
	// Prefixes are loopback or private ranges that may be called.
	Prefixes []netip.Prefix
}

// ParsePolicy reads CURATE_OUTBOUND_ALLOW: host names, IP addresses and
// CIDRs separated by commas or spaces.
func ParsePolicy(s string) (Policy, error) {
	var p Policy
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' }) {
		f = strings.ToLower(strings.TrimSpace(f))
		if pre, err := netip.ParsePrefix(f); err == nil {
			p.Prefixes = append(p.Prefixes, pre.Masked())
			continue
		}
		if a, err := netip.ParseAddr(f); err == nil {
			p.Prefixes = append(p.Prefixes, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		if strings.ContainsAny(f, "/:") || f == "" {
			return Policy{}, fmt.Errorf("CURATE_OUTBOUND_ALLOW: %q is neither a host name, an address nor a CIDR", f)
		}
		p.Hosts = append(p.Hosts, strings.TrimSuffix(f, "."))
	}
	return p, nil
}

// alwaysRefused are ranges no setting opens: link-local (cloud metadata
// lives there: 169.254.169.254, fd00:ec2::254 aside), multicast, and
// addresses that mean "this host" in disguise.
var alwaysRefused = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("224.0.0.0/4"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("100.100.100.200/32"), // Alibaba Cloud metadata
	netip.MustParsePrefix("::/128"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("ff00::/8"),
	netip.MustParsePrefix("fd00:ec2::254/128"), // AWS metadata over IPv6
}

// internal are ranges refused unless the policy lists them.
var internal = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fc00::/7"),
}

// RefusedError is an address the policy does not allow.
type RefusedError struct {
	Host string
	Addr netip.Addr
	// Always is true for addresses no setting allows.
	Always bool
}

func (e *RefusedError) Error() string {
	if e.Always {
		return fmt.Sprintf("%s resolves to %s, a link-local, metadata or reserved address that Curate never calls", e.Host, e.Addr)
	}
	return fmt.Sprintf("%s resolves to %s, a loopback or private address; an operator may allow it with CURATE_OUTBOUND_ALLOW", e.Host, e.Addr)
}

// Check reports whether host, resolved to addr, may be called.
func (p Policy) Check(host string, addr netip.Addr) error {
	// A zone (fe80::1%eth0) would make every prefix miss the address, so
	// it is dropped before matching; IPv4-mapped IPv6 is matched as IPv4.
	addr = addr.Unmap().WithZone("")
	for _, pre := range alwaysRefused {
		if pre.Contains(addr) {
			return &RefusedError{Host: host, Addr: addr, Always: true}
		}
	}
	isInternal := slices.ContainsFunc(internal, func(pre netip.Prefix) bool { return pre.Contains(addr) })
	if !isInternal {
		return nil
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if slices.Contains(p.Hosts, host) || slices.ContainsFunc(p.Prefixes, func(pre netip.Prefix) bool { return pre.Contains(addr) }) {
		return nil
	}
	return &RefusedError{Host: host, Addr: addr}
}

// Client makes outbound calls under a policy. Set its fields before the
// first call to HTTP and leave them: the client it returns is built once,
// so that every caller shares its connections.
type Client struct {
	Policy   Policy
	Timeout  time.Duration // per exchange; DefaultTimeout when 0
	MaxBody  int64         // bytes of a response body; DefaultMaxBody when 0
	Redirect int           // redirects followed; DefaultRedirect when 0, -1 for none

	once sync.Once
	http *http.Client
}

// HTTP returns a standard client that applies the policy on every
// connection and redirect and caps response bodies. Every package that
// calls a user-named server takes its client from here.
func (c *Client) HTTP() *http.Client {
	c.once.Do(func() { c.http = c.build() })
	return c.http
}

func (c *Client) build() *http.Client {
	timeout := cmpOr(c.Timeout, DefaultTimeout)
	maxBody := cmpOr(c.MaxBody, DefaultMaxBody)
	redirects := cmpOr(c.Redirect, DefaultRedirect)
	policy := c.Policy
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		d := &net.Dialer{Timeout: timeout, ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			return policy.Check(host, ap.Addr())
		}}
		return d.DialContext(ctx, network, addr)
	}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would make the checked address the proxy's
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,

		// Best-of-N and evaluations send one server several requests at
		// once: their connections are kept for the next batch (the
		// default keeps 2 a host and dials the others again).
		MaxIdleConnsPerHost: 16,
	}
	return &http.Client{
		Timeout:   timeout,
		Transport: capped{next: tr, max: maxBody},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if redirects < 0 || len(via) > redirects {
				return &RedirectError{To: req.URL.Redacted(), Reason: "too many redirects"}
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return &RedirectError{To: req.URL.Redacted(), Reason: "not http or https"}
			}
			// The address itself is checked when the redirect connects.
			return nil
		},
	}
}

// lookupTimeout bounds the DNS lookup of CheckURL, which backs a form.
const lookupTimeout = 5 * time.Second

// CheckURL is the check made when an address Curate will call is saved, so
// that a form can refuse it beside its field: the URL must be http or
// https with a host, and every address the host resolves to now must be
// one the policy allows. It returns a *URLError or a *RefusedError, for
// Describe, or nil. A name that does not resolve (yet, or at the moment)
// is not refused here: nothing can be said of it, and the call checks the
// address it connects to anyway, as it must, since DNS may change after
// the check.
func (c *Client) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return &URLError{Reason: "it is not a URL"}
	case u.Scheme != "http" && u.Scheme != "https":
		return &URLError{Reason: "it does not start with http:// or https://"}
	case u.Hostname() == "":
		return &URLError{Reason: "it has no host name"}
	}
	host := u.Hostname()
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		defer cancel()
		if addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
			return nil
		}
	}
	for _, a := range addrs {
		if err := c.Policy.Check(host, a); err != nil {
			return err
		}
	}
	return nil
}

// URLError is an address that is not one Curate calls whatever it
// resolves to.
type URLError struct{ Reason string }

func (e *URLError) Error() string { return "address refused: " + e.Reason }

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// RedirectError is a redirect the client would not follow.
type RedirectError struct {
	To     string
	Reason string
}

func (e *RedirectError) Error() string { return "redirect to " + e.To + " refused: " + e.Reason }

// TooLargeError is a response body over the cap.
type TooLargeError struct{ Max int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("the answer is larger than %d bytes", e.Max)
}

// capped bounds every response body.
type capped struct {
	next http.RoundTripper
	max  int64
}

func (t capped) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.max {
		resp.Body.Close()
		return nil, &TooLargeError{Max: t.max}
	}
	resp.Body = &limitedBody{r: resp.Body, left: t.max, max: t.max}
	return resp, nil
}

type limitedBody struct {
	r    io.ReadCloser
	left int64
	max  int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly max from a longer one.
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			return 0, &TooLargeError{Max: b.max}
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.r.Close() }

// StatusError is an answer other than the one expected. Its Error names
// only the status; Body is for the log.
type StatusError struct {
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("the server answered %d %s", e.Status, http.StatusText(e.Status))
}

// Status reads an unexpected answer into a StatusError, keeping at most
// LogBodyLimit bytes of its body for the log, and closes the body.
func Status(resp *http.Response) *StatusError {
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, LogBodyLimit))
	return &StatusError{Status: resp.StatusCode, Body: string(b)}
}

// Describer is a failure of another system that knows its own sentence,
// such as a fine-tuning provider's refusal; Describe uses it.
type Describer interface {
	Describe() string
}

// Describe turns a failure of another system into a sentence fit for a
// page: what happened, in words, with no remote text and no internal
// address. It is the one place such failures are worded; their detail
// belongs in the log.
func Describe(err error) string {
	var (
		own      Describer
		refused  *RefusedError
		badURL   *URLError
		redirect *RedirectError
		large    *TooLargeError
		status   *StatusError
		uerr     *url.Error
		dnsErr   *net.DNSError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &own):
		return own.Describe()
	case errors.As(err, &refused):
		if refused.Always {
			return "Curate does not call this address: it is a link-local or cloud metadata address."
		}
		return "This address is on a private or loopback network, which Curate does not call unless the operator allows it (CURATE_OUTBOUND_ALLOW)."
	case errors.As(err, &badURL):
		return "Curate does not call this address: " + badURL.Reason + "."
	case errors.As(err, &redirect):
		return "The server redirected somewhere Curate does not follow (" + redirect.Reason + ")."
	case errors.As(err, &large):
		return "The server's answer was too large."
	case errors.As(err, &status):
		return fmt.Sprintf("The server answered %d %s.", status.Status, http.StatusText(status.Status))
	case errors.As(err, &dnsErr):
		return "The host name could not be found."
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return "The server did not answer in time."
	case errors.Is(err, syscall.ECONNREFUSED):
		return "The server refused the connection."
	case errors.As(err, &uerr):
		return "The server could not be reached."
	default:
		return "The call failed."
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Transient tells a failure worth asking again for (a 5xx, a 429, a network
// error or timeout) from one that will stay the same: a refused address or
// redirect, an answer too large, a 4xx, or an answer that is not JSON.
func Transient(err error) bool {
	var (
		status   *StatusError
		refused  *RefusedError
		redirect *RedirectError
		large    *TooLargeError
		badURL   *URLError
		syntax   *json.SyntaxError
	)
	switch {
	case err == nil, errors.As(err, &refused), errors.As(err, &redirect), errors.As(err, &large), errors.As(err, &badURL), errors.As(err, &syntax):
		return false
	case errors.As(err, &status):
		return status.Status >= 500 || status.Status == http.StatusTooManyRequests
	}
	return true
}
