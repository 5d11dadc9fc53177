package policy

import (
	"fmt"
	"regexp"
)

// Names of a policy, its tiers and its limits, and its key prefixes are
// written into generated configurations (nginx, HAProxy), keys, paths and
// terminals: they are data, so they are kept to alphabets that mean nothing
// in any of those syntaxes. The generators escape what they write as well;
// this check makes a hostile policy fail at load time, naming the field.
var (
	// nameRE: a policy or tier name (and default_tier, rules_fallback).
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	// limitNameRE: a limit's name, which by default reads "10@5/s" or
	// "100/1m0s".
	limitNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@/+:-]{0,63}$`)
	// keyPrefixRE: the start of API keys ("free-", "sk_live_", "ak.").
	keyPrefixRE = regexp.MustCompile(`^[A-Za-z0-9._~+/=:@-]{0,128}$`)
)

// What each alphabet allows, for messages.
const (
	nameChars      = "1–64 letters, digits, '.', '_' or '-', starting with a letter or digit"
	limitNameChars = "1–64 letters, digits and . _ - @ / + :, starting with a letter or digit"
	keyPrefixChars = "at most 128 letters, digits and . _ ~ + / = : @ -"
)

// CheckName reports whether s may name a policy or a tier.
func CheckName(s string) error {
	if !nameRE.MatchString(s) {
		return fmt.Errorf("%q is not a safe name: want %s", s, nameChars)
	}
	return nil
}

// CheckLimitName reports whether s may name a limit.
func CheckLimitName(s string) error {
	if !limitNameRE.MatchString(s) {
		return fmt.Errorf("%q is not a safe limit name: want %s", s, limitNameChars)
	}
	return nil
}

// CheckKeyPrefix reports whether s may start a tier's keys.
func CheckKeyPrefix(s string) error {
	if !keyPrefixRE.MatchString(s) {
		return fmt.Errorf("%q is not a safe key prefix: want %s", s, keyPrefixChars)
	}
	return nil
}
