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
