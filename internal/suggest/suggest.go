// Package suggest finds the name a user probably meant when they typed one
// that does not exist (a flag value, a YAML field, a plan), for "did you
// mean" hints in messages. It is a leaf: it imports nothing of rlverify.
package suggest

import "fmt"

// Closest returns the candidate nearest to word by edit distance (case
// sensitive), when it is near enough to be a typo: at most 2 edits, and
// fewer than half of word's length. ok is false when none is.
func Closest(word string, candidates []string) (best string, ok bool) {
	bestD := -1
	for _, c := range candidates {
		if c == word {
			continue
		}
		d := Distance(word, c)
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 || bestD > 2 || 2*bestD >= len([]rune(word)) {
		return "", false
	}
	return best, true
}

// DidYouMean is ` (did you mean "X"?)` for the closest candidate, or ""
// when none is close.
func DidYouMean(word string, candidates []string) string {
	if c, ok := Closest(word, candidates); ok {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// Distance is the Levenshtein distance between a and b, in runes.
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
