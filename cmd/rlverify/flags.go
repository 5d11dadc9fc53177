package main

import (
	"errors"
	"regexp"
	"strings"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/internal/prose"
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
// fields, and a one-word field set to a value. A name joined to the user's
// text (a key Out-1, a header X-Force-Key) is left alone (prose.Replace).
func flagWords(s string) string {
	s = prose.Replace(s, fieldValues, func(m []string) string { return "--" + strings.ToLower(m[1]) + " " + m[2] })
	return prose.Replace(s, fieldNames, func(m []string) string { return strings.Fields(optionFlags[m[0]])[0] })
}

// docWords is flagWords for a result document's prose, where the user's keys
// and plan names are: a one-word field (Store, Out, Budget) could be one of
// them, so only compound names (MaxRequests, Checks.Off) are said.
func docWords(s string) string {
	return prose.Replace(s, fieldNames, func(m []string) string {
		if !prose.Compound(m[0]) {
			return ""
		}
		return strings.Fields(optionFlags[m[0]])[0]
	})
}

// commentWords is flagWords for a policy file: only its comments are prose.
func commentWords(yaml []byte) []byte { return prose.YAMLComments(yaml, flagWords) }

// flagWorded is a library error said with flags; it unwraps to the
// library's error.
type flagWorded struct {
	msg string
	err error
}

func (e *flagWorded) Error() string { return e.msg }
func (e *flagWorded) Unwrap() error { return e.err }
