package rubrics

import (
	"html"
	"regexp"
	"strings"
)

// GuidelinesHTML renders a rubric's guidelines, written in a small part of
// Markdown (headings, lists, paragraphs, **bold**, *emphasis*, `code` and
// links to http(s) addresses), as HTML that is safe to place in a page:
// every character the author wrote is escaped first, and only the tags
// made here are added, so no markup or script of theirs survives.
func GuidelinesHTML(md string) string {
	var b strings.Builder
	list := "" // "ul" or "ol" while a list is open
	var para []string
	flush := func() {
		if len(para) > 0 {
			b.WriteString("<p>" + inline(strings.Join(para, " ")) + "</p>\n")
			para = nil
		}
	}
	closeList := func() {
		if list != "" {
			b.WriteString("</" + list + ">\n")
			list = ""
		}
	}
	for _, line := range strings.Split(strings.ReplaceAll(md, "\r\n", "\n"), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case t == "":
			flush()
			closeList()
		case strings.HasPrefix(t, "#"):
			flush()
			closeList()
			level := len(t) - len(strings.TrimLeft(t, "#"))
			text := strings.TrimSpace(t[level:])
			level = min(max(level, 1), 3) + 2 // h3..h5 beside the item's own headings
			tag := "h" + string(rune('0'+level))
			b.WriteString("<" + tag + ">" + inline(text) + "</" + tag + ">\n")
		case strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* "):
			flush()
			if list != "ul" {
				closeList()
				b.WriteString("<ul>\n")
				list = "ul"
			}
			b.WriteString("<li>" + inline(strings.TrimSpace(t[2:])) + "</li>\n")
		case orderedItem.MatchString(t):
			flush()
			if list != "ol" {
				closeList()
				b.WriteString("<ol>\n")
				list = "ol"
			}
			b.WriteString("<li>" + inline(orderedItem.ReplaceAllString(t, "")) + "</li>\n")
		default:
			closeList()
			para = append(para, t)
		}
	}
	flush()
	closeList()
	return b.String()
}

var (
	orderedItem = regexp.MustCompile(`^\d{1,3}[.)]\s+`)
	codeSpan    = regexp.MustCompile("`([^`]+)`")
	strong      = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	emphasis    = regexp.MustCompile(`\*([^*]+)\*`)
	link        = regexp.MustCompile(`\[([^\]]+)\]\((https?://[^\s()]+)\)`)
)

// inline escapes a line and adds the inline markup. The patterns match
// the escaped text, so what they wrap is escaped already; a link's
// address is an http(s) URL without quotes (escaping turned any into
// entities).
func inline(s string) string {
	s = html.EscapeString(s)
	var codes []string
	s = codeSpan.ReplaceAllStringFunc(s, func(m string) string {
		codes = append(codes, "<code>"+m[1:len(m)-1]+"</code>")
		return "\x00" + string(rune('a'+len(codes)-1)) + "\x00"
	})
	s = link.ReplaceAllString(s, `<a href="$2" rel="noopener noreferrer">$1</a>`)
	s = strong.ReplaceAllString(s, "<strong>$1</strong>")
	s = emphasis.ReplaceAllString(s, "<em>$1</em>")
	for i, c := range codes {
		s = strings.Replace(s, "\x00"+string(rune('a'+i))+"\x00", c, 1)
	}
	return s
}
