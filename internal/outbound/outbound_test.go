package outbound

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestCheckRefusesInternalAndMetadata(t *testing.T) {
	open, err := ParsePolicy("10.1.0.0/16, gpu-1.lan 169.254.0.0/16 ::1")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		host, addr     string
		policy         Policy
		refused, never bool
	}{
		{"example.com", "93.184.215.14", Policy{}, false, false},
		{"localhost", "127.0.0.1", Policy{}, true, false},
		{"x", "10.1.2.3", Policy{}, true, false},
		{"x", "172.20.0.1", Policy{}, true, false},
		{"x", "192.168.1.1", Policy{}, true, false},
		{"x", "100.64.0.1", Policy{}, true, false},
		{"x", "fd12::1", Policy{}, true, false},
		{"x", "::ffff:127.0.0.1", Policy{}, true, false}, // IPv4-mapped loopback
		{"metadata", "169.254.169.254", Policy{}, true, true},
		{"metadata", "169.254.169.254", open, true, true}, // no setting opens it
		{"x", "fe80::1", open, true, true},
		{"x", "0.0.0.0", open, true, true},
		{"x", "fd00:ec2::254", open, true, true},
		{"x", "10.1.2.3", open, false, false},
		{"x", "10.2.0.1", open, true, false},
		{"GPU-1.lan.", "192.168.7.7", open, false, false}, // allowed by name
		{"x", "::1", open, false, false},
		// A zone must not hide an address from the ranges it is in.
		{"x", "fe80::1%eth0", open, true, true},
		{"x", "::1%lo", Policy{}, true, false},
	}
	for _, c := range cases {
		err := c.policy.Check(c.host, netip.MustParseAddr(c.addr))
		var r *RefusedError
		if got := errors.As(err, &r); got != c.refused || (got && r.Always != c.never) {
			t.Errorf("Check(%s, %s) = %v; want refused=%v always=%v", c.host, c.addr, err, c.refused, c.never)
		}
	}
	if _, err := ParsePolicy("http://x/"); err == nil {
		t.Error("ParsePolicy accepted a URL")
	}
}

// Every range of IANA's IPv4 and IPv6 Special-Purpose Address Registries
// (iana.org/assignments/iana-ipv4-special-registry and
// iana-ipv6-special-registry, as of 2024), with multicast and site-local,
// is refused; the operator's list opens all but link-local, metadata,
// multicast, reserved and unspecified addresses. An address carrying an
// IPv4 address (IPv4-mapped, NAT64 64:ff9b::/96, 6to4 2002::/16) is judged
// as that address: RFC 6052 puts it in the last 32 bits, RFC 3056 in bits
// 16 to 47. Addresses just outside each range are ordinary.
func TestCheckSpecialPurposeRanges(t *testing.T) {
	open, err := ParsePolicy("0.0.0.0/0, ::/0")
	if err != nil {
		t.Fatal(err)
	}
	const (
		public  = ""
		special = "special" // refused unless allowed
		never   = "never"
	)
	cases := []struct{ addr, want string }{
		{"0.0.0.0", never}, {"0.1.2.3", never}, // "this network"
		{"10.0.0.1", special}, {"100.64.0.1", special}, {"100.127.255.254", special}, {"100.128.0.1", public},
		{"127.0.0.1", special}, {"127.255.255.254", special},
		{"169.254.169.254", never},
		{"172.16.0.1", special}, {"172.31.255.254", special}, {"172.32.0.1", public},
		{"192.0.0.1", special}, {"192.0.0.9", special}, {"192.0.0.170", special}, {"192.0.1.1", public}, // IETF protocol assignments
		{"192.0.2.1", special}, {"198.51.100.7", special}, {"203.0.113.9", special}, // documentation
		{"192.31.196.1", special}, {"192.52.193.1", special}, {"192.88.99.1", special}, {"192.175.48.1", special},
		{"192.168.0.1", special}, {"198.18.0.1", special}, {"198.19.255.254", special}, {"198.20.0.1", public}, // benchmarking
		{"224.0.0.1", never}, {"239.255.255.250", never}, {"240.0.0.1", never}, {"255.255.255.255", never},
		{"8.8.8.8", public}, {"93.184.215.14", public},

		{"::", never}, {"::1", special},
		{"::127.0.0.1", special}, {"::8.8.8.8", special}, // IPv4-compatible
		{"::ffff:127.0.0.1", special}, {"::ffff:169.254.169.254", never}, {"::ffff:8.8.8.8", public}, // IPv4-mapped
		{"::ffff:0:a00:1", special}, // IPv4-translated
		{"64:ff9b::7f00:1", special}, {"64:ff9b::a9fe:a9fe", never}, {"64:ff9b::c0a8:101", special}, {"64:ff9b::808:808", public},
		{"64:ff9b:1::808:808", special}, // local-use translation
		{"100::1", special}, {"100:0:0:1::1", special},
		{"2001::1", special}, {"2001:0:4136:e378:8000:63bf:3fff:fdd2", special}, // Teredo
		{"2001:1::1", special}, {"2001:2::1", special}, {"2001:3::1", special}, {"2001:4:112::1", special},
		{"2001:10::1", special}, {"2001:20::1", special}, {"2001:30::1", special}, {"2001:1ff::1", special}, {"2001:200::1", public},
		{"2001:db8::1", special}, {"2620:4f:8000::1", special}, {"3fff::1", special}, {"5f00::1", special},
		{"2002:7f00:1::1", special}, {"2002:a9fe:a9fe::1", never}, {"2002:a00:1::1", special}, {"2002:808:808::1", public}, // 6to4
		{"fc00::1", special}, {"fd12::1", special}, {"fec0::1", special}, {"feff::1", special},
		{"fe80::1", never}, {"ff02::1", never}, {"fd00:ec2::254", never},
		{"2001:4860:4860::8888", public}, {"2606:4700::1111", public},
	}
	for _, c := range cases {
		addr := netip.MustParseAddr(c.addr)
		for _, p := range []struct {
			name   string
			policy Policy
			want   string
		}{{"no policy", Policy{}, c.want}, {"everything allowed", open, map[string]string{never: never}[c.want]}} {
			err := p.policy.Check("h", addr)
			var r *RefusedError
			got := public
			if errors.As(err, &r) {
				got = map[bool]string{false: special, true: never}[r.Always]
			} else if err != nil {
				t.Fatalf("Check(%s) = %v", c.addr, err)
			}
			if got != p.want {
				t.Errorf("Check(%s) with %s = %v; want %q", c.addr, p.name, err, p.want)
			}
		}
	}
	// An allowed IPv4 range opens the IPv6 forms that lead to it.
	lan, _ := ParsePolicy("192.168.0.0/16")
	for _, a := range []string{"::ffff:192.168.1.1", "64:ff9b::c0a8:101", "2002:c0a8:101::1"} {
		if err := lan.Check("h", netip.MustParseAddr(a)); err != nil {
			t.Errorf("Check(%s) under 192.168.0.0/16 = %v; want allowed", a, err)
		}
	}
}

func get(t *testing.T, c *Client, u string) (*http.Response, error) {
	t.Helper()
	resp, err := c.HTTP().Get(u)
	if err == nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

func TestLoopbackOnlyWhenAllowed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	_, err := get(t, &Client{}, srv.URL)
	var r *RefusedError
	if !errors.As(err, &r) {
		t.Fatalf("GET loopback with no policy = %v; want refused", err)
	}
	if d := Describe(err); !strings.Contains(d, "CURATE_OUTBOUND_ALLOW") || strings.Contains(d, "127.0.0.1") {
		t.Errorf("Describe = %q; want the setting named and no address", d)
	}
	resp, err := get(t, &Client{Policy: Policy{Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}, srv.URL)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET loopback allowed by CIDR = %v", err)
	}
	u, _ := url.Parse(srv.URL)
	resp, err = get(t, &Client{Policy: Policy{Hosts: []string{"localhost"}}}, "http://localhost:"+u.Port())
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET localhost allowed by name = %v", err)
	}
}

func TestRedirectIsCheckedAgain(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "internal") }))
	defer target.Close()
	var to string
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) }))
	defer front.Close()
	// The front server is allowed by name; what it redirects to, by IP, is not.
	c := &Client{Policy: Policy{Hosts: []string{"localhost"}}}
	fu, _ := url.Parse(front.URL)
	to = target.URL
	_, err := get(t, c, "http://localhost:"+fu.Port())
	var r *RefusedError
	if !errors.As(err, &r) {
		t.Fatalf("redirect to a refused address = %v; want refused", err)
	}
	to = "file:///etc/passwd"
	_, err = get(t, c, "http://localhost:"+fu.Port())
	var re *RedirectError
	if !errors.As(err, &re) {
		t.Fatalf("redirect to file: = %v; want a refused redirect", err)
	}
}

func TestBodyCapAndNoRemoteText(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Write([]byte(strings.Repeat("a", 4096)))
			return
		}
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "secret internal detail "+strings.Repeat("x", 800))
	}))
	defer srv.Close()
	c := &Client{MaxBody: 1024, Policy: Policy{Prefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}
	resp, err := get(t, c, srv.URL+"/big")
	if err == nil {
		_, err = io.ReadAll(resp.Body)
	}
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("4 KiB body with a 1 KiB cap = %v; want too large", err)
	}
	resp, err = get(t, c, srv.URL+"/fail")
	if err != nil {
		t.Fatal(err)
	}
	se := Status(resp)
	if len(se.Body) != LogBodyLimit || !strings.HasPrefix(se.Body, "secret") {
		t.Errorf("logged body is %d bytes; want the first %d", len(se.Body), LogBodyLimit)
	}
	if d := Describe(se); d != "The server answered 502 Bad Gateway." {
		t.Errorf("Describe = %q", d)
	}
	if strings.Contains(se.Error(), "secret") {
		t.Errorf("Error() shows the remote body: %q", se.Error())
	}
}

func TestCheckURL(t *testing.T) {
	loopback, err := ParsePolicy("127.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	byName := Policy{Hosts: []string{"localhost"}}
	cases := []struct {
		url    string
		policy Policy
		want   string // "" allowed, "refused", "never" (always refused) or "url"
	}{
		{"http://127.0.0.1:8080/hook", Policy{}, "refused"},
		{"http://localhost:3000", Policy{}, "refused"}, // resolved, not taken by its name
		{"http://10.0.0.1/", Policy{}, "refused"},
		{"https://192.168.1.20/", Policy{}, "refused"},
		{"http://[fd12::1]:80/", Policy{}, "refused"},
		{"http://169.254.169.254/latest/meta-data/", Policy{}, "never"},
		{"http://169.254.169.254/latest/meta-data/", loopback, "never"},
		{"http://[fe80::1%25eth0]/", loopback, "never"},
		{"http://[::ffff:169.254.169.254]/", loopback, "never"},
		{"http://0.0.0.0:8080/", loopback, "never"},
		{"http://127.0.0.1:8080/hook", loopback, ""},
		{"http://localhost:3000", loopback, ""},
		{"http://localhost:3000", byName, ""},
		{"http://127.0.0.1:3000", byName, "refused"}, // the name is allowed, not the address
		{"https://93.184.215.14/", Policy{}, ""},
		// A name that does not resolve says nothing; the call checks again.
		{"https://curate-test.invalid/", Policy{}, ""},
		{"ftp://example.com/x", Policy{}, "url"},
		{"file:///etc/passwd", loopback, "url"},
		{"http:///nohost", Policy{}, "url"},
		{"http://%zz", Policy{}, "url"},
		// Only plain names and address literals: an escaped tab, a
		// semicolon, an interface zone, numbers a resolver may read as an
		// address.
		{"http://127.0.0.1%2509/", loopback, "url"},
		{"http://exa%2509mple.com/", Policy{}, "url"},
		{"http://a;b.example/", Policy{}, "url"},
		{"http://-a.example/", Policy{}, "url"},
		{"http://" + strings.Repeat("a", 64) + ".example/", Policy{}, "url"},
		{"http://[2606:4700::1111%25eth0]/", Policy{}, "url"},
		{"http://[::1%2509]/", Policy{}, "refused"},
		{"http://127.1/", loopback, "url"},
		{"http://0x7f000001/", loopback, "url"},
		{"http://2130706433/", loopback, "url"},
		{"http://0177.0.0.1/", loopback, "url"},
		{"http://judge_1.internal.invalid./", Policy{}, ""},
		{"http://[64:ff9b::7f00:1]/", Policy{}, "refused"},
		{"http://[64:ff9b::7f00:1]/", loopback, ""},
		{"http://[2002:a9fe:a9fe::1]/", loopback, "never"},
		{"http://192.0.0.170/", Policy{}, "refused"},
		{"http://[fec0::1]/", Policy{}, "refused"},
	}
	for _, c := range cases {
		err := (&Client{Policy: c.policy}).CheckURL(context.Background(), c.url)
		var (
			r   *RefusedError
			u   *URLError
			got string
		)
		switch {
		case err == nil:
		case errors.As(err, &r) && r.Always:
			got = "never"
		case errors.As(err, &r):
			got = "refused"
		case errors.As(err, &u):
			got = "url"
		default:
			got = "other: " + err.Error()
		}
		if got != c.want {
			t.Errorf("CheckURL(%s) under %+v = %v (%s); want %q", c.url, c.policy, err, got, c.want)
		}
		if err != nil && (strings.Contains(Describe(err), "127.0.0.1") || strings.Contains(Describe(err), "169.254")) {
			t.Errorf("Describe names the address: %q", Describe(err))
		}
	}
}

func TestHTTPIsBuiltOnce(t *testing.T) {
	c := &Client{}
	first, second := c.HTTP(), c.HTTP()
	if first != second {
		t.Error("HTTP built a second client: connections would not be shared")
	}
}
