// Package outbound is the one HTTP client for every call Curate makes to a
// server a user named: a Langfuse host, an alert webhook, a judge or other
// OpenAI-compatible endpoint, and a serving target (vLLM, a provider, a
// deploy webhook). A user who can type a URL must not be
// able to make Curate reach its own network, so:
//
//   - the address is checked after DNS resolution, on the connection itself
//     (a name that resolves to a public address for the check and a private
//     one for the request cannot slip through), and again on every redirect;
//   - the host must be a plain DNS name or an IP address literal;
//   - loopback, private, shared, unique-local and every other range of IANA's
//     special-purpose registries are refused unless the operator lists them
//     (CURATE_OUTBOUND_ALLOW: host names and CIDRs); an address that carries
//     an IPv4 address (IPv4-mapped, NAT64, 6to4) is judged as that address;
//   - link-local addresses, cloud metadata services, multicast, reserved and
//     unspecified addresses are refused always;
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

// The ranges below follow IANA's IPv4 and IPv6 Special-Purpose Address
// Registries (RFC 6890 and its updates), with multicast, the deprecated
// IPv6 site-local range and the IPv4-translated form added. A range in
// neither list is an ordinary unicast address.

// alwaysRefused are ranges no setting opens: link-local (cloud metadata
// lives there: 169.254.169.254, fd00:ec2::254 aside), multicast, and
// addresses that mean "this host" or nothing at all.
var alwaysRefused = prefixes(
	"0.0.0.0/8",          // "this network": 0.0.0.0 reaches this host
	"169.254.0.0/16",     // link-local
	"224.0.0.0/4",        // multicast
	"240.0.0.0/4",        // reserved, and the limited broadcast 255.255.255.255
	"100.100.100.200/32", // Alibaba Cloud metadata
	"::/128",             // unspecified
	"fe80::/10",          // link-local
	"ff00::/8",           // multicast
	"fd00:ec2::254/128",  // AWS metadata over IPv6
)

// special are the registries' other ranges: refused unless the operator
// lists them (CURATE_OUTBOUND_ALLOW). Some reach this host or its network
// (loopback, private, shared, unique-local, site-local, tunnels and
// translators whose far end is local); the rest are for documentation,
// benchmarking and protocol use, and no user's server lives there.
var special = prefixes(
	// IPv4.
	"10.0.0.0/8",      // private
	"100.64.0.0/10",   // shared address space (carrier-grade NAT)
	"127.0.0.0/8",     // loopback
	"172.16.0.0/12",   // private
	"192.0.0.0/24",    // IETF protocol assignments (DS-Lite, NAT64 discovery, anycast)
	"192.0.2.0/24",    // documentation (TEST-NET-1)
	"192.31.196.0/24", // AS112
	"192.52.193.0/24", // AMT
	"192.88.99.0/24",  // 6to4 relay anycast (deprecated)
	"192.168.0.0/16",  // private
	"192.175.48.0/24", // AS112 direct delegation
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // documentation (TEST-NET-2)
	"203.0.113.0/24",  // documentation (TEST-NET-3)
	// IPv6.
	"::/96",             // IPv4-compatible (deprecated), and the loopback ::1
	"::ffff:0:0:0/96",   // IPv4-translated (SIIT)
	"64:ff9b:1::/48",    // local-use IPv4/IPv6 translation
	"100::/64",          // discard-only
	"100:0:0:1::/64",    // dummy prefix
	"2001::/23",         // IETF protocol assignments: Teredo, benchmarking, ORCHID, AMT, AS112, anycast
	"2001:db8::/32",     // documentation
	"2620:4f:8000::/48", // AS112 direct delegation
	"3fff::/20",         // documentation
	"5f00::/16",         // segment routing (SRv6) SIDs
	"fc00::/7",          // unique-local
	"fec0::/10",         // site-local (deprecated)
)

// Forms of IPv6 that carry an IPv4 address the traffic goes on to: they are
// judged as that IPv4 address.
var (
	nat64 = netip.MustParsePrefix("64:ff9b::/96") // RFC 6052's well-known prefix: the IPv4 is the last 32 bits
	sixTo = netip.MustParsePrefix("2002::/16")    // 6to4 (RFC 3056): the IPv4 is bits 16 to 47
)

func prefixes(cidrs ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(cidrs))
	for i, c := range cidrs {
		out[i] = netip.MustParsePrefix(c)
	}
	return out
}

// embeddedIPv4 is the IPv4 address an IPv4-mapped, NAT64 or 6to4 address
// leads to.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case a.Is4In6():
		return a.Unmap(), true
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixTo.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
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
		return fmt.Sprintf("%s resolves to %s, a link-local, metadata, multicast or reserved address that Curate never calls", e.Host, e.Addr)
	}
	return fmt.Sprintf("%s resolves to %s, a loopback, private or special-purpose address; an operator may allow it with CURATE_OUTBOUND_ALLOW", e.Host, e.Addr)
}

// Check reports whether host, resolved to addr, may be called. An address
// that carries an IPv4 address (IPv4-mapped, NAT64, 6to4) is judged as
// that IPv4 address as well as itself, since that is where it leads.
func (p Policy) Check(host string, addr netip.Addr) error {
	// A zone (fe80::1%eth0) would make every prefix miss the address, so
	// it is dropped before matching.
	addr = addr.WithZone("")
	forms := []netip.Addr{addr}
	if v4, ok := embeddedIPv4(addr); ok {
		forms = append(forms, v4)
	}
	in := func(list []netip.Prefix) bool {
		return slices.ContainsFunc(list, func(pre netip.Prefix) bool { return slices.ContainsFunc(forms, pre.Contains) })
	}
	if in(alwaysRefused) {
		return &RefusedError{Host: host, Addr: addr.Unmap(), Always: true}
	}
	if !in(special) {
		return nil
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if slices.Contains(p.Hosts, host) || in(p.Prefixes) {
		return nil
	}
	return &RefusedError{Host: host, Addr: addr.Unmap()}
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
		if _, err := netip.ParseAddr(host); err != nil {
			if reason := badHostName(host); reason != "" {
				return nil, &URLError{Reason: reason}
			}
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
// https with a host that is a plain DNS name or an IP address literal, and
// every address the host resolves to now must be one the policy allows. It returns a *URLError or a *RefusedError, for
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
	if a, err := netip.ParseAddr(host); err == nil {
		if err := c.Policy.Check(host, a); err != nil {
			return err
		}
		if a.Zone() != "" {
			return &URLError{Reason: "its address names a network interface"}
		}
		return nil
	}
	if reason := badHostName(host); reason != "" {
		return &URLError{Reason: reason}
	}
	ctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if err := c.Policy.Check(host, a); err != nil {
			return err
		}
	}
	return nil
}

// badHostName says why host is not a plain DNS name ("" when it is one):
// ASCII letters, digits, hyphens and underscores in dot-separated labels
// of at most 63 characters, at most 253 in all. Names made only of numbers
// ("127.1", "0x7f000001", "2130706433") are refused too: some resolvers
// read them as IPv4 addresses in the old shorthand, so what the check
// resolved and what the call connects to could differ.
func badHostName(host string) string {
	name := strings.TrimSuffix(host, ".")
	if name == "" || len(name) > 253 {
		return "its host is not a DNS name"
	}
	numeric := true
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "its host is not a DNS name"
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return "its host is neither a DNS name nor an IP address"
			}
		}
		numeric = numeric && isNumberLabel(label)
	}
	if numeric {
		return "its host is an IP address written in a form Curate does not read; write it as a.b.c.d or in brackets for IPv6"
	}
	return ""
}

// isNumberLabel reports whether a label reads as a number: decimal, octal
// (a leading 0) or hexadecimal (0x...).
func isNumberLabel(label string) bool {
	digits := label
	if l := strings.ToLower(label); strings.HasPrefix(l, "0x") {
		digits = l[2:]
		return !strings.ContainsFunc(digits, func(r rune) bool { return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') })
	}
	return !strings.ContainsFunc(digits, func(r rune) bool { return r < '0' || r > '9' })
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
			return "Curate does not call this address: it is a link-local or cloud metadata address, or a multicast or reserved one."
		}
		return "This address is on a private or loopback network, or in another special-purpose range, which Curate does not call unless the operator allows it (CURATE_OUTBOUND_ALLOW)."
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
