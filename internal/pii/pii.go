// Package pii finds personal data in free text (feedback queries, responses,
// corrections) and masks it before the text goes into a training file.
//
// Each kind has a precompiled candidate pattern and a check that the pattern
// cannot express: the Luhn digit of a card, the mod-97 checksum of an IBAN,
// the value range of an IP address, the allocation rules of an SSN, and the
// characters around the match (Go's regexp has no look-around).
//
// Detection favours precision over recall: a number that merely could be a
// phone number (a bare run of digits, a date, a version) is left alone.
//
// Text in which no pattern matches costs no allocations: Detect makes one
// pass over the bytes and runs a pattern only where a cheap test says a
// candidate may start. Each candidate that matches a pattern but fails its
// check (a date shaped like a phone number, "std::" shaped like an IPv6
// address) costs one small allocation.
package pii

import (
	"math/bits"
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

// Kind names a class of personal data. Its value is also the mask text
// between brackets.
type Kind string

// The kinds this package detects.
const (
	Email      Kind = "EMAIL"
	Phone      Kind = "PHONE"
	Card       Kind = "CARD"
	IBAN       Kind = "IBAN"
	IP         Kind = "IP"
	NationalID Kind = "NATIONAL_ID"
)

// Finding is one piece of personal data: text[Start:End] == Match, with
// Start and End byte offsets into the text given to Detect.
type Finding struct {
	Kind  Kind
	Start int
	End   int
	Match string
}

// detector finds candidates of one kind. Candidates start only where a word
// starts (no kind here may be glued to a preceding letter or digit), so
// Detect tries a detector only at word starts whose first byte it accepts
// and that pass its cheap `at` test, and runs its anchored pattern there.
// Ordinary prose thus costs one pass over the bytes and a few comparisons
// per word.
type detector struct {
	kind Kind
	// first holds the bytes a candidate can start with.
	first string
	// at reports whether a candidate can start at text[i].
	at func(text string, i int) bool
	// re is anchored at the candidate start.
	re *regexp.Regexp
	// check sees the whole text so it can look at the bytes around a
	// candidate; it returns where the finding ends (the pattern's end,
	// except for IBANs, whose length depends on the country).
	check func(text string, start, end int) (int, bool)
}

// maxCandidate bounds the bytes a pattern looks at from a candidate start;
// no valid finding of the positional kinds is longer. It keeps the cost of
// a failed attempt independent of the length of the text.
const maxCandidate = 80

// keepEnd adapts a yes/no check to detector.check.
func keepEnd(valid func(text string, start, end int) bool) func(string, int, int) (int, bool) {
	return func(text string, start, end int) (int, bool) { return end, valid(text, start, end) }
}

const (
	digits   = "0123456789"
	upper    = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	letters  = upper + "abcdefghijklmnopqrstuvwxyz"
	hexColon = digits + "abcdefABCDEF:"
)

func anchored(pattern string) *regexp.Regexp { return regexp.MustCompile(`^(?:` + pattern + `)`) }

// The patterns are package-level values because regexp.Regexp is safe for
// concurrent use and compiling them per call would dominate the cost.
var (
	emailPattern = anchored(`[A-Za-z0-9._%+\-]+@[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,}`)

	detectors = [...]detector{
		{
			kind:  IBAN,
			first: letters,
			at: func(s string, i int) bool {
				return i+4 <= len(s) && isLetter(s[i]) && isLetter(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3])
			},
			re:    anchored(`[A-Za-z]{2}[0-9]{2}`),
			check: matchIBAN,
		},
		{
			kind:  Card,
			first: digits,
			at:    func(s string, i int) bool { return isDigit(s[i]) && digitsInRun(s, i, " -") >= 13 },
			re:    anchored(`[0-9](?:[ \-]?[0-9]){12,18}`),
			check: keepEnd(validCard),
		},
		{
			// US Social Security number.
			kind:  NationalID,
			first: digits,
			at:    func(s string, i int) bool { return i+11 <= len(s) && s[i+3] == '-' && s[i+6] == '-' },
			re:    anchored(`[0-9]{3}-[0-9]{2}-[0-9]{4}`),
			check: keepEnd(validSSN),
		},
		{
			// UK National Insurance number, the "national-id-like" pattern:
			// two prefix letters, six digits, a suffix letter A-D, written
			// without spaces or in the printed "AB 12 34 56 C" grouping.
			kind:  NationalID,
			first: upper,
			at: func(s string, i int) bool {
				return i+3 <= len(s) && isUpper(s[i]) && isUpper(s[i+1]) && (isDigit(s[i+2]) || s[i+2] == ' ')
			},
			re:    anchored(`[A-Z]{2} ?[0-9]{2} ?[0-9]{2} ?[0-9]{2} ?[A-D]`),
			check: keepEnd(validNINO),
		},
		{
			kind:  IP,
			first: digits,
			at: func(s string, i int) bool {
				return strings.IndexByte(s[i:min(len(s), i+4)], '.') > 0 && digitsInRun(s, i, ".") >= 4
			},
			re:    anchored(`[0-9]{1,3}(?:\.[0-9]{1,3}){3}`),
			check: keepEnd(validIPv4),
		},
		{
			// IPv6 candidates are runs of hex groups and colons, optionally
			// ending in an embedded IPv4 address; netip decides what is valid.
			kind:  IP,
			first: hexColon,
			at:    ipv6At,
			re:    anchored(`(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9]{1,3}(?:\.[0-9]{1,3}){3}|[0-9A-Fa-f]{0,4})`),
			check: keepEnd(validIPv6),
		},
		{
			// International: +country code, then up to seven groups.
			kind:  Phone,
			first: "+",
			at:    func(s string, i int) bool { return s[i] == '+' && digitsInRun(s, i+1, "() .-") >= 8 },
			re:    anchored(`\+[1-9][0-9]{0,2}(?:[ .\-]?\(?[0-9]{1,5}\)?){1,7}`),
			check: keepEnd(validIntlPhone),
		},
		{
			// North American: (555) 123-4567, 555-123-4567, 555.123.4567.
			kind:  Phone,
			first: "(23456789",
			at: func(s string, i int) bool {
				return (s[i] == '(' || '2' <= s[i] && s[i] <= '9') && digitsInRun(s, i, "() .-") >= 10
			},
			re:    anchored(`\(?[2-9][0-9]{2}\)?[ .\-]?[0-9]{3}[ .\-][0-9]{4}`),
			check: keepEnd(validNANPPhone),
		},
		{
			// National numbers with a trunk prefix 0, as written in most of
			// Europe: 020 7946 0958, 07700 900123, (030) 1234567,
			// 06 12 34 56 78.
			kind:  Phone,
			first: "(0",
			at: func(s string, i int) bool {
				return (s[i] == '0' || s[i] == '(' && i+1 < len(s) && s[i+1] == '0') && digitsInRun(s, i, "() .-/") >= 9
			},
			re:    anchored(`\(?0[0-9]{1,4}\)?(?:[ .\-/]?[0-9]{2,4}){1,5}`),
			check: keepEnd(validTrunkPhone),
		},
	}
)

// digitsInRun counts the digits from s[i] on while the bytes are digits or
// separators from seps, looking at no more than maxCandidate bytes.
func digitsInRun(s string, i int, seps string) int {
	n := 0
	for k := i; k < len(s) && k < i+maxCandidate; k++ {
		switch {
		case isDigit(s[k]):
			n++
		case strings.IndexByte(seps, s[k]) < 0:
			return n
		}
	}
	return n
}

// ipv6At wants hex digits or a colon, with a colon within the first five
// bytes (a group has at most four hex digits).
func ipv6At(s string, i int) bool {
	for k := i; k < len(s) && k < i+5; k++ {
		switch c := s[k]; {
		case c == ':':
			return true
		case !isHex(c):
			return false
		}
	}
	return false
}

// starters[c] has bit k set when detector k can start with byte c, so the
// scan in Detect looks at most bytes only once.
var starters = func() (t [256]uint16) {
	for k, d := range detectors {
		for i := 0; i < len(d.first); i++ {
			t[d.first[i]] |= 1 << k
		}
	}
	return t
}()

// kindOrder breaks ties between overlapping findings of equal length.
var kindOrder = map[Kind]int{Email: 0, IBAN: 1, Card: 2, NationalID: 3, IP: 4, Phone: 5}

// Detect returns the personal data found in text, ordered by Start. Where
// candidates overlap, the longest wins (then the earliest, then the kind
// order EMAIL, IBAN, CARD, NATIONAL_ID, IP, PHONE), so the result never
// overlaps and does not depend on pattern order.
func Detect(text string) []Finding {
	found := findEmails(text, nil)
	// resume[k] is where detector k may look again after a finding, so one
	// detector never reports overlapping matches of its own.
	var resume [len(detectors)]int
	for i := 0; i < len(text); i++ {
		can := starters[text[i]]
		if can == 0 || i > 0 && isAlnum(text[i-1]) {
			continue
		}
		for ; can != 0; can &= can - 1 {
			k := bits.TrailingZeros16(can)
			d := &detectors[k]
			if i < resume[k] || !d.at(text, i) {
				continue
			}
			loc := d.re.FindStringIndex(text[i:min(len(text), i+maxCandidate)])
			if loc == nil {
				continue
			}
			if end, ok := d.check(text, i, i+loc[1]); ok {
				found = append(found, Finding{Kind: d.kind, Start: i, End: end, Match: text[i:end]})
				resume[k] = end
			}
		}
	}
	if len(found) < 2 {
		return found
	}
	return resolveOverlaps(found)
}

func resolveOverlaps(found []Finding) []Finding {
	slices.SortFunc(found, func(a, b Finding) int {
		if la, lb := a.End-a.Start, b.End-b.Start; la != lb {
			return lb - la
		}
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		return kindOrder[a.Kind] - kindOrder[b.Kind]
	})
	kept := found[:0]
	for _, f := range found {
		overlaps := false
		for _, k := range kept {
			if f.Start < k.End && k.Start < f.End {
				overlaps = true
				break
			}
		}
		if !overlaps {
			kept = append(kept, f)
		}
	}
	slices.SortFunc(kept, func(a, b Finding) int { return a.Start - b.Start })
	return kept
}

// Kinds returns the distinct kinds found in text, sorted.
func Kinds(text string) []string {
	var kinds []string
	for _, f := range Detect(text) {
		if !slices.Contains(kinds, string(f.Kind)) {
			kinds = append(kinds, string(f.Kind))
		}
	}
	slices.Sort(kinds)
	return kinds
}

// Mask replaces every finding with its kind in brackets, e.g. "[EMAIL]".
// Text with no findings is returned as is.
func Mask(text string) string {
	found := Detect(text)
	if len(found) == 0 {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	last := 0
	for _, f := range found {
		b.WriteString(text[last:f.Start])
		b.WriteByte('[')
		b.WriteString(string(f.Kind))
		b.WriteByte(']')
		last = f.End
	}
	b.WriteString(text[last:])
	return b.String()
}

// findEmails finds addresses around each '@': it walks back over the
// characters an address's local part may hold and matches from there.
func findEmails(text string, found []Finding) []Finding {
	for from := 0; ; {
		at := strings.IndexByte(text[from:], '@')
		if at < 0 {
			return found
		}
		at += from
		start := at
		for start > from && at-start < 64 && isLocalPart(text[start-1]) {
			start--
		}
		// A sentence's full stop is not part of the address after it.
		for start < at && text[start] == '.' {
			start++
		}
		from = at + 1
		loc := emailPattern.FindStringIndex(text[start:min(len(text), at+256)])
		if loc == nil || !validEmail(text, start, start+loc[1]) {
			continue
		}
		end := start + loc[1]
		found = append(found, Finding{Kind: Email, Start: start, End: end, Match: text[start:end]})
		from = end
	}
}

// --- character classes and boundaries ---

func isLocalPart(c byte) bool { return isAlnum(c) || strings.IndexByte("._%+-", c) >= 0 }

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }

func isHex(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isAlnum(c byte) bool {
	return isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_'
}

// before returns the byte before i, or 0 at the start of the text.
func before(text string, i int) byte {
	if i == 0 {
		return 0
	}
	return text[i-1]
}

// cleanEnd reports whether a number ending at end really ends there: the next
// byte is not part of a word, and not a separator followed by more digits
// (which would make the match a piece of a longer number).
func cleanEnd(text string, end int, seps string) bool {
	if end == len(text) {
		return true
	}
	c := text[end]
	if isAlnum(c) {
		return false
	}
	if strings.IndexByte(seps, c) >= 0 && end+1 < len(text) && isDigit(text[end+1]) {
		return false
	}
	return true
}

// cleanStart reports whether a number starting at start really starts there.
func cleanStart(text string, start int, seps string) bool {
	c := before(text, start)
	return !isAlnum(c) && strings.IndexByte(seps, c) < 0
}

// sameSeparators reports whether all non-digit bytes of s (other than
// parentheses) are the same byte, so "555-123-4567" passes and a date
// followed by a number ("01.02.2024 10") does not.
func sameSeparators(s string) bool {
	var sep byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isDigit(c) || c == '(' || c == ')' {
			continue
		}
		if sep != 0 && c != sep {
			return false
		}
		sep = c
	}
	return true
}

func countDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			n++
		}
	}
	return n
}

// allSameDigit reports whether every digit in s is the same, which rules
// out placeholders such as 0000 0000 0000 0000 (it passes Luhn).
func allSameDigit(s string) bool {
	var first byte
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			continue
		}
		if first == 0 {
			first = s[i]
		} else if s[i] != first {
			return false
		}
	}
	return true
}

// balancedParens reports whether s has no parenthesis or exactly one "(" that
// comes before one ")".
func balancedParens(s string) bool {
	open, closing := strings.Count(s, "("), strings.Count(s, ")")
	if open == 0 && closing == 0 {
		return true
	}
	return open == 1 && closing == 1 && strings.IndexByte(s, '(') < strings.IndexByte(s, ')')
}

// --- per-kind checks ---

func validEmail(text string, start, end int) bool {
	local := text[start : strings.IndexByte(text[start:end], '@')+start]
	return !strings.HasPrefix(local, ".") && !strings.HasSuffix(local, ".") && !strings.Contains(local, "..")
}

func validCard(text string, start, end int) bool {
	s := text[start:end]
	return cleanStart(text, start, ".-+") && cleanEnd(text, end, " -.") &&
		sameSeparators(s) && !allSameDigit(s) && luhn(s)
}

// luhn checks the Luhn (mod 10) check digit over the digits of s.
func luhn(s string) bool {
	sum, double := 0, false
	for i := len(s) - 1; i >= 0; i-- {
		if !isDigit(s[i]) {
			continue
		}
		d := int(s[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// validSSN applies the Social Security Administration's rules: area 000,
// 666 and 900-999 are never issued, nor group 00 or serial 0000.
func validSSN(text string, start, end int) bool {
	s := text[start:end]
	if !cleanStart(text, start, "-.+") || !cleanEnd(text, end, "-.") {
		return false
	}
	area, group, serial := s[0:3], s[4:6], s[7:11]
	return area != "000" && area != "666" && area[0] != '9' && group != "00" && serial != "0000"
}

// validNINO applies HMRC's format rules for National Insurance numbers: the
// first letter is not D, F, I, Q, U or V; the second is not D, F, I, O, Q,
// U or V; the prefixes BG, GB, KN, NK, NT, TN and ZZ are not allocated.
// Spaces must be all present or all absent.
func validNINO(text string, start, end int) bool {
	s := text[start:end]
	if isAlnum(before(text, start)) || end < len(text) && isAlnum(text[end]) {
		return false
	}
	if spaces := strings.Count(s, " "); spaces != 0 && spaces != 4 {
		return false
	}
	if strings.IndexByte("DFIQUV", s[0]) >= 0 || strings.IndexByte("DFIOQUV", s[1]) >= 0 {
		return false
	}
	switch s[:2] {
	case "BG", "GB", "KN", "NK", "NT", "TN", "ZZ":
		return false
	}
	return true
}

func validIPv4(text string, start, end int) bool {
	if !cleanStart(text, start, ".") || !cleanEnd(text, end, ".") {
		return false
	}
	addr, err := netip.ParseAddr(text[start:end])
	return err == nil && addr.Is4()
}

func validIPv6(text string, start, end int) bool {
	s := text[start:end]
	if s == "::" || !cleanStart(text, start, ".:") {
		return false
	}
	if end < len(text) && (isAlnum(text[end]) || text[end] == ':') {
		return false
	}
	addr, err := netip.ParseAddr(s)
	return err == nil && addr.Is6()
}

func validIntlPhone(text string, start, end int) bool {
	s := text[start:end]
	n := countDigits(s)
	return n >= 8 && n <= 15 && !isAlnum(before(text, start)) && cleanEnd(text, end, " .-") &&
		balancedParens(s) && !allSameDigit(s)
}

func validNANPPhone(text string, start, end int) bool {
	s := text[start:end]
	if !cleanStart(text, start, ".-+/") || !cleanEnd(text, end, ".-/") || !balancedParens(s) {
		return false
	}
	if s[0] == '(' {
		return s[4] == ')'
	}
	// Without parentheses the three groups must be split the same way.
	return !strings.ContainsRune(s, ')') && len(s) == 12 && s[3] == s[7]
}

func validTrunkPhone(text string, start, end int) bool {
	s := text[start:end]
	n := countDigits(s)
	// "000" is neither a trunk prefix nor an international one ("00").
	if n < 9 || n > 12 || !balancedParens(s) || allSameDigit(s) || strings.HasPrefix(strings.TrimLeft(s, "("), "000") {
		return false
	}
	if (s[0] == '(') != strings.ContainsRune(s, ')') {
		return false
	}
	inner := s
	if i := strings.IndexByte(s, ')'); i >= 0 {
		inner = strings.TrimLeft(s[i+1:], " ")
	}
	return cleanStart(text, start, ".-+/") && cleanEnd(text, end, " .-/") && sameSeparators(inner)
}

// ibanLengths is the total IBAN length per country, from the SWIFT IBAN
// registry. A candidate is cut at exactly this many characters, so text that
// follows an IBAN is never swallowed into it.
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22,
	"BH": 22, "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24,
	"DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18,
	"FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27,
	"GT": 28, "HN": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26,
	"IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20,
	"LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20,
	"MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
	"PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
	"SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25,
	"SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
	"YE": 30,
}

// matchIBAN reads an IBAN starting at start (where the pattern found a
// country code and check digits), written compactly or in groups separated
// by single spaces, and checks its ISO 13616 mod-97 checksum.
func matchIBAN(text string, start, _ int) (int, bool) {
	if isAlnum(before(text, start)) {
		return 0, false
	}
	want, ok := ibanLengths[strings.ToUpper(text[start:start+2])]
	if !ok {
		return 0, false
	}
	var chars [34]byte
	n, i := 0, start
	for i < len(text) && n < want {
		c := text[i]
		switch {
		case isDigit(c) || 'A' <= c && c <= 'Z':
			chars[n] = c
		case 'a' <= c && c <= 'z':
			chars[n] = c - 'a' + 'A'
		case c == ' ' && i+1 < len(text) && text[i+1] != ' ':
			i++
			continue
		default:
			return 0, false
		}
		n++
		i++
	}
	if n < want || i < len(text) && isAlnum(text[i]) {
		return 0, false
	}
	return i, ibanChecksum(chars[:n])
}

// ibanChecksum moves the country code and check digits to the end, reads
// letters as 10..35 and checks that the number is 1 modulo 97.
func ibanChecksum(iban []byte) bool {
	rem := 0
	for k := range iban {
		c := iban[(k+4)%len(iban)]
		if isDigit(c) {
			rem = (rem*10 + int(c-'0')) % 97
		} else {
			rem = (rem*100 + int(c-'A') + 10) % 97
		}
	}
	return rem == 1
}
