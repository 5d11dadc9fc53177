// Package prose rewrites names inside human prose without touching the
// user's text that shares it: the command says the library's option fields
// (MaxRequests) as its flags (--max-requests) in messages that also carry
// keys, plan names, header names and policy values, which are data.
package prose

import (
	"regexp"
	"strings"
	"unicode"
)

// glue are the characters that join a name to a longer token: a key
// (Out-1), a header name (X-Force-Key), a path, a quoted or templated name.
const glue = "-_./@'\"`:=+#$%&*|~<>[]{}\\"

// Replace returns s with every match of re that stands as a word of its own
// replaced by repl(submatches); a match joined to a longer token (Joined) is
// left alone, and so is one for which repl returns "".
func Replace(s string, re *regexp.Regexp, repl func(m []string) string) string {
	var b strings.Builder
	last := 0
	for _, ix := range re.FindAllStringSubmatchIndex(s, -1) {
		if Joined(s, ix[0], ix[1]) {
			continue
		}
		m := make([]string, len(ix)/2)
		for i := range m {
			if ix[2*i] >= 0 {
				m[i] = s[ix[2*i]:ix[2*i+1]]
			}
		}
		r := repl(m)
		if r == "" {
			continue
		}
		b.WriteString(s[last:ix[0]])
		b.WriteString(r)
		last = ix[1]
	}
	b.WriteString(s[last:])
	return b.String()
}

// Joined reports whether s[i:j] is part of a longer token rather than a word
// of the prose. A colon, period or comma followed by a space or a closing
// parenthesis ends a clause ("Store: redis", "in Targets."); followed by
// anything else it continues a token ("Store.x", "Out:1").
func Joined(s string, i, j int) bool {
	if i > 0 && strings.ContainsRune(glue, rune(s[i-1])) {
		return true
	}
	if j >= len(s) || !strings.ContainsRune(glue, rune(s[j])) {
		return false
	}
	if s[j] != ':' && s[j] != '.' {
		return true
	}
	return j+1 < len(s) && !unicode.IsSpace(rune(s[j+1])) && s[j+1] != ')'
}

// Compound reports whether name is not an English word, so prose that also
// carries the user's words can be rewritten safely: dotted (Checks.Off), or
// with a capital after its first letter (MaxRequests).
func Compound(name string) bool {
	return strings.Contains(name, ".") || (len(name) > 1 && strings.IndexFunc(name[1:], unicode.IsUpper) >= 0)
}

// YAMLComments returns a YAML document with say applied to its comments
// only: names, keys and values are the user's data and stay as written. A
// comment starts at a # that begins the line or follows a space or tab.
func YAMLComments(doc []byte, say func(string) string) []byte {
	lines := strings.SplitAfter(string(doc), "\n")
	for i, l := range lines {
		at := -1
		for k := 0; k < len(l); k++ {
			if l[k] == '#' && (k == 0 || l[k-1] == ' ' || l[k-1] == '\t') {
				at = k
				break
			}
		}
		if at >= 0 {
			lines[i] = l[:at] + say(l[at:])
		}
	}
	return []byte(strings.Join(lines, ""))
}
