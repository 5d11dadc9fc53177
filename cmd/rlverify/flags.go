package main

import (
	"errors"
	"regexp"
	"strings"
	"unicode"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/envs"
)

// optionFlags is the one table from the library's option fields to the
// flags that set them: the library's errors name fields
// (*rlverify.OptionError), and the command says them as flags. A new
// option with a rule adds a row here, nothing else in cmd/.
//
// A field whose row is "" names no one flag (the request's shape comes from
// --method, --header and --body): its message stands as the library says it.
var optionFlags = map[string]string{
	"Request":                            "",
	"Keys":                               "",
	"Plan":                               "--plan",
	"Plans":                              "--plans",
	"Policy":                             "--policy FILE",
	"Env":                                "--env",
	"Environment":                        "--env",
	"Handler":                            "--target",
	"Targets":                            "--target",
	"Instances":                          "--instances",
	"Regions":                            "--regions",
	"RedisURL":                           "--redis",
	"RedisCluster":                       "--redis-cluster",
	"AllowRemote":                        "--allow-remote",
	"MaxHeaderBytes":                     "--max-header-bytes",
	"MaxHeaders":                         "--max-headers",
	"Environment.StoreProxies":           "--store-proxy",
	"StoreProxies":                       "--store-proxy",
	"Environment.Toxiproxy":              "--toxiproxy",
	"Environment.ToxiproxyProxies":       "--toxiproxy-proxy",
	"Environment.Downstream.RemoteSink":  "--sink",
	"Environment.Downstream.JSONCounter": "--downstream-json",
	"Environment.Downstream.PromCounter": "--downstream-prometheus",
	"Environment.Downstream":             "",
	"Environment.OnInject":               "--on-inject",
	"Environment.OnClear":                "--on-clear",
	"Environment.HookTimeout":            "--hook-timeout",
	"Environment.JSONURL":                "--downstream-json",
	"Environment.JSONTotal":              "--downstream-total",
	"Environment.PromURL":                "--downstream-prometheus",
	"Environment.PromMetric":             "--downstream-metric",
	"OnInject":                           "--on-inject",
	"OnClear":                            "--on-clear",
	"ToxiproxyProxies":                   "--toxiproxy-proxy",
	"ToxiproxyURL":                       "--toxiproxy",
	"Sink":                               "--sink",
	"JSONURL":                            "--downstream-json",
	"JSONTotal":                          "--downstream-total",
	"JSONByKey":                          "--downstream-by-key",
	"PromURL":                            "--downstream-prometheus",
	"PromMetric":                         "--downstream-metric",
	"PromLabel":                          "--downstream-label",
	"Store":                              "--store",
	"Limiter":                            "--limiter",
	"LimiterPolicy":                      "--limiter-policy",
	"Honest":                             "--honest",
	"KeysFile":                           "--keys",
	"FailOn":                             "--fail-on",
	"Thresholds":                         "--threshold",
	"Checks.Only":                        "--checks",
	"Checks.Off":                         "--checks-off",
	"Checks.MaxErrorRate":                "--max-error-rate",
	"Overrides.Identity":                 "--identity",
	"Overrides.Admitted":                 "--admitted",
	"Overrides.Rejected":                 "--rejected",
	"PlanFiles":                          "--plan",
	"DiscoverBeside":                     "--discover",
	"At":                                 "--at",
	"Limiters":                           "--limiter",
	"Read.Format":                        "--from",
	"Read.MaxDisorder":                   "--max-disorder",
	"KeyRegex":                           "--key-regex",
	"MaxRefused":                         "--max-refused",
	"MaxRefusedPerKey":                   "--max-refused-per-key",
	"AbusiveKeys":                        "--abusive-keys",
	"AbusiveStatus":                      "--abusive-status",
	"Compare":                            "--compare",
	"Calibrate.TimelineMax":              "--timeline-rows",
	"Redis":                              "--redis",
	"RedisLatency":                       "--redis-latency",
	"RegionMode":                         "--region-mode",
	"Control":                            "--control",
	"ControlToken":                       "--control-token",
	"InstanceMap":                        "--instance",
	"From":                               "--from",
	"Out":                                "-o",
	"Force":                              "--force",
	"Shard":                              "--shard",
	"ShardIndex":                         "--shard-index",
	"In":                                 "--in",
	"Formats":                            "--format",
	"Dir":                                "--out",
	"RegionSettings":                     "--region-setting",
	"Histories":                          "--history",
	"Checks.Slack":                       "--clock-skew",
	"Request.Method":                     "--method",
	"Request.Headers":                    "--header",
	"Request.Body":                       "--body",
	"Budget":                             "--budget",
	"Reports":                            "--report",
	"WritePolicy":                        "--write-policy",
	"HistoryFile":                        "--history",
	"RunID":                              "--run-id",
	"ReplaceHistory":                     "--force",
	"MaxDuration":                        "--max-duration",
	"MaxRequests":                        "--max-requests",
	"KeepKeys":                           "--keep-keys",
	"BodyFilesAnywhere":                  "--body-files-anywhere",
	"Read.SkipMalformed":                 "--skip-malformed",
	"Importer.KeyTag":                    "--key-tag",
	"Importer.Key":                       "--key",
}

// fieldNames finds the fields a message mentions besides its subject: the
// multi-word ones only (AllowRemote, RedisCluster), which no English text
// is made of.
var fieldNames = regexp.MustCompile(`\b(Checks\.Slack|Checks\.Off|Checks\.MaxErrorRate|Read\.SkipMalformed|Read\.MaxDisorder|Importer\.KeyTag|Importer\.Key|Overrides\.Identity|Overrides\.Admitted|InstanceMap|MaxDuration|MaxRequests|KeepKeys|BodyFilesAnywhere|Budget|Request\.Method|Request\.Headers|Request\.Body|Limiters|Targets|AllowRemote|RedisCluster|RedisURL|MaxHeaderBytes|MaxHeaders|ToxiproxyProxies|StoreProxies|OnInject|OnClear|ToxiproxyURL|JSONURL|JSONTotal|JSONByKey|PromURL|PromMetric|PromLabel|Sink|Store|Regions|ReplaceHistory|Force|Out|RunID|RegionSettings|ShardIndex|ControlToken|LimiterPolicy|KeysFile|DiscoverBeside|PlanFiles)\b`)

// fieldValues finds a one-word field set to a value ("Env external",
// "Store: redis"), said as the flag with its value.
var fieldValues = regexp.MustCompile(`\b(Env|Store):? (embedded|local|docker|external|gateway|redis|memory)\b`)

// flagMessage is err's message with the option fields it names said as
// flags: the subject of an *rlverify.OptionError, and any other field the
// message mentions.
func flagMessage(err error) string {
	msg := err.Error()
	var fe *envs.FieldError
	if errors.As(err, &fe) {
		if flag := optionFlags["Environment."+fe.Field]; flag != "" {
			msg = strings.Replace(msg, fe.Error(), flag+" "+fe.Err.Error(), 1)
		}
	}
	var oe *rlverify.OptionError
	if errors.As(err, &oe) && oe.Field != "" {
		if flag, ok := optionFlags[oe.Field]; ok {
			said := oe.Err.Error()
			if flag != "" {
				said = flag + " " + said
			}
			msg = strings.Replace(msg, oe.Error(), said, 1)
		}
	}
	return flagWords(msg)
}

// flagWords is s with the option fields it names said as flags (errors, an
// audit's skip reasons, a report's notes and summaries): the multi-word
// fields, and a one-word field set to a value. Prose also carries the
// user's text (keys, plan names, header names): a name joined to other
// characters of a word ("X-Force-Key", "Out-1", "my.Store", "'Sink'") is
// left alone, and documents (docWords) translate only compound names.
func flagWords(s string) string { return sayFlags(s, false) }

// docWords is flagWords for a result document's prose, where the user's keys
// and plan names are: a one-word field (Store, Out, Budget) could be one of
// them, so only compound and dotted names (MaxRequests, Checks.Off) are said.
func docWords(s string) string { return sayFlags(s, true) }

func sayFlags(s string, compoundOnly bool) string {
	var b strings.Builder
	last := 0
	say := func(re *regexp.Regexp, repl func(m []string) string) {
		b.Reset()
		last = 0
		for _, ix := range re.FindAllStringSubmatchIndex(s, -1) {
			if joined(s, ix[0], ix[1]) {
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
		s = b.String()
	}
	if !compoundOnly {
		say(fieldValues, func(m []string) string { return "--" + strings.ToLower(m[1]) + " " + m[2] })
	}
	say(fieldNames, func(m []string) string {
		if compoundOnly && !compound(m[0]) {
			return ""
		}
		return strings.Fields(optionFlags[m[0]])[0]
	})
	return s
}

// commentWords is flagWords for a policy file: only its comments are prose;
// names, keys and values are the user's data and stay as they are.
func commentWords(yaml []byte) []byte {
	lines := strings.SplitAfter(string(yaml), "\n")
	for i, l := range lines {
		at := strings.Index(l, "#")
		for at > 0 && l[at-1] != ' ' && l[at-1] != '\t' {
			next := strings.Index(l[at+1:], "#")
			if next < 0 {
				at = -1
				break
			}
			at += 1 + next
		}
		if at >= 0 {
			lines[i] = l[:at] + flagWords(l[at:])
		}
	}
	return []byte(strings.Join(lines, ""))
}

// joined reports whether s[i:j] is part of a longer token: a key, a header
// name, a path or a quoted name rather than a field named in prose.
func joined(s string, i, j int) bool {
	const glue = "-_./@'\"`:=+#$%&*|~<>[]{}"
	if i > 0 && strings.ContainsRune(glue, rune(s[i-1])) {
		return true
	}
	// A trailing colon, period or comma ends a clause ("Store: redis",
	// "in Targets."); any other glue continues a token.
	if j < len(s) && strings.ContainsRune(glue, rune(s[j])) && !strings.ContainsRune(":.", rune(s[j])) {
		return true
	}
	if j+1 < len(s) && strings.ContainsRune(":.", rune(s[j])) && !unicode.IsSpace(rune(s[j+1])) && s[j+1] != ')' {
		return true // "Store.x", "Out:1"
	}
	return false
}

// compound reports whether a field name is not an English word: dotted, or
// with a capital after its first letter.
func compound(f string) bool {
	return strings.ContainsAny(f, ".") || strings.IndexFunc(f[1:], unicode.IsUpper) >= 0
}

// flagWorded is a library error said with flags; it unwraps to the
// library's error.
type flagWorded struct {
	msg string
	err error
}

func (e *flagWorded) Error() string { return e.msg }
func (e *flagWorded) Unwrap() error { return e.err }
