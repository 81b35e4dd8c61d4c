package pii

import (
	"slices"
	"strings"
	"testing"
)

// The positive examples are published test values: card numbers from the
// card networks' test ranges, IBANs from the ECBS/SWIFT registry examples,
// IPv6 documentation addresses (RFC 3849), UK numbers from Ofcom's drama
// ranges.
func TestDetectSingleFinding(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		kind  Kind
		match string
	}{
		{"email", "write to jane.doe@example.com today", Email, "jane.doe@example.com"},
		{"email plus tag subdomains", "cc: J+tag@mail.example.co.uk.", Email, "J+tag@mail.example.co.uk"},
		{"visa spaced", "card 4111 1111 1111 1111 exp 12/29", Card, "4111 1111 1111 1111"},
		{"visa compact", "4111111111111111", Card, "4111111111111111"},
		{"mastercard dashed", "pay with 5555-5555-5555-4444.", Card, "5555-5555-5555-4444"},
		{"amex 15 digits", "amex 3782 822463 10005 ok", Card, "3782 822463 10005"},
		{"card after unrelated number", "order 12 4111 1111 1111 1111", Card, "4111 1111 1111 1111"},
		{"iban GB printed", "IBAN: GB82 WEST 1234 5698 7654 32 AND", IBAN, "GB82 WEST 1234 5698 7654 32"},
		{"iban GB compact", "GB82WEST12345698765432", IBAN, "GB82WEST12345698765432"},
		{"iban DE", "Konto DE89 3704 0044 0532 0130 00, danke", IBAN, "DE89 3704 0044 0532 0130 00"},
		{"iban lower case", "iban de89370400440532013000", IBAN, "de89370400440532013000"},
		{"ipv4", "from 192.168.1.10.", IP, "192.168.1.10"},
		{"ipv4 edges", "0.0.0.0 is the unspecified one", IP, "0.0.0.0"},
		{"ipv4 255", "mask 255.255.255.255", IP, "255.255.255.255"},
		{"ipv6", "host 2001:db8::1 is up", IP, "2001:db8::1"},
		{"ipv6 loopback", "ping ::1 now", IP, "::1"},
		{"ipv6 full", "fe80:0:0:0:1ff:fe23:4567:890a", IP, "fe80:0:0:0:1ff:fe23:4567:890a"},
		{"ipv6 bracketed with port", "[2001:db8::ff00:42:8329]:443", IP, "2001:db8::ff00:42:8329"},
		{"ipv4 in ipv6", "mapped ::ffff:192.0.2.1 here", IP, "::ffff:192.0.2.1"},
		{"ssn", "SSN 078-05-1120.", NationalID, "078-05-1120"},
		{"nino spaced", "NI number AB 12 34 56 C", NationalID, "AB 12 34 56 C"},
		{"nino compact", "ni:JG103759A", NationalID, "JG103759A"},
		{"phone intl US", "call +1 (555) 123-4567 now", Phone, "+1 (555) 123-4567"},
		{"phone intl UK", "ring +44 20 7946 0958", Phone, "+44 20 7946 0958"},
		{"phone intl UK trunk in parens", "ring +44 (0)20 7946 0958", Phone, "+44 (0)20 7946 0958"},
		{"phone intl FR", "+33 1 23 45 67 89", Phone, "+33 1 23 45 67 89"},
		{"phone intl compact", "whatsapp +4915112345678", Phone, "+4915112345678"},
		{"phone NANP parens", "(555) 123-4567", Phone, "(555) 123-4567"},
		{"phone NANP dashes", "tel: 555-123-4567.", Phone, "555-123-4567"},
		{"phone NANP dots", "555.123.4567", Phone, "555.123.4567"},
		{"phone UK national", "office 020 7946 0958", Phone, "020 7946 0958"},
		{"phone UK mobile", "mobile 07700 900123", Phone, "07700 900123"},
		{"phone FR national", "appelez le 06 12 34 56 78", Phone, "06 12 34 56 78"},
		{"phone DE area in parens", "Tel. (030) 1234567", Phone, "(030) 1234567"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Detect(tt.text)
			if len(got) != 1 {
				t.Fatalf("Detect(%q) = %+v, want one %s finding %q", tt.text, got, tt.kind, tt.match)
			}
			f := got[0]
			if f.Kind != tt.kind || f.Match != tt.match {
				t.Fatalf("Detect(%q) = %s %q, want %s %q", tt.text, f.Kind, f.Match, tt.kind, tt.match)
			}
			if want := strings.Index(tt.text, tt.match); f.Start != want || f.End != want+len(tt.match) {
				t.Fatalf("offsets %d..%d, want %d..%d", f.Start, f.End, want, want+len(tt.match))
			}
		})
	}
}

func TestDetectNothing(t *testing.T) {
	tests := []struct{ name, text string }{
		{"plain", "The quick brown fox jumps over the lazy dog."},
		{"year", "Back in 2024 we shipped it."},
		{"iso date", "Released 2024-01-15."},
		{"iso datetime", "at 2024-01-15T10:30:00Z sharp"},
		{"european dates", "from 01.02.2024 to 15/03/2024 and 31-12-2023"},
		{"date then number", "on 01.02.2024 10 people came"},
		{"versions", "go1.22.3, v2.10.4 and version 1.2.3"},
		{"short numbers", "call 911 or 112, room 101, 12345 items"},
		{"big number with commas", "revenue of 1,234,567,890 dollars"},
		{"decimal", "pi is 3.14159265358979"},
		{"time", "meet at 10:30:45"},
		{"luhn fails", "card 4111 1111 1111 1112"},
		{"luhn fails compact", "4111111111111112"},
		{"all zeros passes luhn but is a placeholder", "0000 0000 0000 0000"},
		{"mixed separators card", "4111 1111-1111 1111"},
		{"too many digits", "41111111111111111111111"},
		{"iban one digit changed", "GB82 WEST 1234 5698 7654 33"},
		{"iban check digits changed", "GB83 WEST 1234 5698 7654 32"},
		{"iban unknown country", "XX82 WEST 1234 5698 7654 32"},
		{"iban too short", "GB82 WEST 1234 5698 7654"},
		{"iban glued to word", "GB82WEST12345698765432X"},
		{"ipv4 octet out of range", "256.1.1.1 and 1.2.3.999"},
		{"ipv4 too few parts", "1.2.3"},
		{"ipv4 part of longer dotted", "1.2.3.4.5"},
		{"ipv4 in a word", "v1.2.3.4"},
		{"scope operator", "use std::vector and Foo::Bar"},
		{"mac address", "00:1A:2B:3C:4D:5E"},
		{"ssn area 000", "000-12-3456"},
		{"ssn area 666", "666-12-3456"},
		{"ssn area 9xx", "912-34-5678"},
		{"ssn group 00", "123-00-4567"},
		{"ssn serial 0000", "123-45-0000"},
		{"nino reserved prefix", "GB 12 34 56 A"},
		{"nino bad first letter", "QQ123456C"},
		{"nino bad suffix", "AB123456E"},
		{"nino uneven spaces", "AB 123456 C"},
		{"email without domain dot", "user@localhost"},
		{"at sign alone", "meet @ noon, @handle"},
		{"phone too few digits", "+1 555 12"},
		{"NANP no separator", "5551234567"},
		{"NANP uneven separators", "555-123.4567"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Detect(tt.text); len(got) != 0 {
				t.Fatalf("Detect(%q) = %+v, want nothing", tt.text, got)
			}
		})
	}
}

func TestDetectSeveralInOrder(t *testing.T) {
	text := "Mail bob@example.org, call +44 20 7946 0958, IBAN GB82 WEST 1234 5698 7654 32, from 10.0.0.7."
	got := Detect(text)
	want := []struct {
		kind  Kind
		match string
	}{
		{Email, "bob@example.org"},
		{Phone, "+44 20 7946 0958"},
		{IBAN, "GB82 WEST 1234 5698 7654 32"},
		{IP, "10.0.0.7"},
	}
	if len(got) != len(want) {
		t.Fatalf("Detect = %+v, want %d findings", got, len(want))
	}
	for i, w := range want {
		if got[i].Kind != w.kind || got[i].Match != w.match || text[got[i].Start:got[i].End] != w.match {
			t.Errorf("finding %d = %+v, want %s %q", i, got[i], w.kind, w.match)
		}
	}
}

// Overlapping candidates: the longest wins.
func TestOverlapsLongestFirst(t *testing.T) {
	tests := []struct {
		text  string
		kind  Kind
		match string
	}{
		// Digits inside the address are a NANP-shaped number, the address is longer.
		{"x 555-123-4567@example.com y", Email, "555-123-4567@example.com"},
		// The embedded IPv4 address is also a candidate.
		{"::ffff:10.1.2.3", IP, "::ffff:10.1.2.3"},
	}
	for _, tt := range tests {
		got := Detect(tt.text)
		if len(got) != 1 || got[0].Kind != tt.kind || got[0].Match != tt.match {
			t.Errorf("Detect(%q) = %+v, want one %s %q", tt.text, got, tt.kind, tt.match)
		}
	}
}

func TestMask(t *testing.T) {
	tests := []struct{ in, want string }{
		{"nothing here", "nothing here"},
		{"", ""},
		{
			"Contact jane@example.com or +44 20 7946 0958, card 4111 1111 1111 1111.",
			"Contact [EMAIL] or [PHONE], card [CARD].",
		},
		{
			"IBAN GB82 WEST 1234 5698 7654 32 / SSN 078-05-1120 / NINO AB123456C / ip 2001:db8::1",
			"IBAN [IBAN] / SSN [NATIONAL_ID] / NINO [NATIONAL_ID] / ip [IP]",
		},
		{"4111111111111111", "[CARD]"},
		{"héllo wörld 192.168.0.1 ünïcode", "héllo wörld [IP] ünïcode"},
	}
	for _, tt := range tests {
		if got := Mask(tt.in); got != tt.want {
			t.Errorf("Mask(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

func TestKinds(t *testing.T) {
	got := Kinds("ip 10.0.0.1, mail a@example.com, other mail b@example.com, ip ::1")
	if want := []string{"EMAIL", "IP"}; !slices.Equal(got, want) {
		t.Fatalf("Kinds = %v, want %v", got, want)
	}
	if got := Kinds("nothing"); len(got) != 0 {
		t.Fatalf("Kinds(nothing) = %v, want empty", got)
	}
}

func TestNoAllocationsWithoutFindings(t *testing.T) {
	// No byte here starts a candidate that reaches a pattern, so the count
	// holds under the race detector too (which makes sync.Pool, and with it
	// regexp's machine cache, drop entries at random).
	text := strings.Repeat("In 2024 we released version 1.2.3 on 15 March to 1,200 users (about 3.5%). ", 20)
	if n := testing.AllocsPerRun(50, func() { Detect(text) }); n != 0 {
		t.Fatalf("Detect allocated %.0f times on text without findings", n)
	}
	if n := testing.AllocsPerRun(50, func() { Mask(text) }); n != 0 {
		t.Fatalf("Mask allocated %.0f times on text without findings", n)
	}
}

// FuzzDetect checks the invariants Detect promises on any input:
// findings are in order, do not overlap, and match the text they point at.
func FuzzDetect(f *testing.F) {
	f.Add("Contact jane@example.com or +44 20 7946 0958, card 4111 1111 1111 1111.")
	f.Add("GB82 WEST 1234 5698 7654 32 ::ffff:1.2.3.4 078-05-1120")
	f.Fuzz(func(t *testing.T, text string) {
		prevEnd := 0
		for _, fd := range Detect(text) {
			if fd.Start < prevEnd || fd.End <= fd.Start || text[fd.Start:fd.End] != fd.Match {
				t.Fatalf("bad finding %+v in %q", fd, text)
			}
			prevEnd = fd.End
		}
		_ = Mask(text)
	})
}

func BenchmarkDetect(b *testing.B) {
	clean := strings.Repeat("The assistant answered the question about the 2024 tax year in version 1.2.3 of the docs. ", 12)
	dirty := clean + "Reach me at jane.doe@example.com or +1 (555) 123-4567; card 4111 1111 1111 1111."
	b.Run("clean-1KB", func(b *testing.B) {
		b.SetBytes(int64(len(clean)))
		b.ReportAllocs()
		for b.Loop() {
			Detect(clean)
		}
	})
	b.Run("with-findings", func(b *testing.B) {
		b.SetBytes(int64(len(dirty)))
		b.ReportAllocs()
		for b.Loop() {
			Mask(dirty)
		}
	})
}
