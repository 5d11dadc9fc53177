package rlverify

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersionFromBuildInfo(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"none", nil, "rlverify (no build information)"},
		{"work tree without stamping", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			"rlverify devel (commit unknown: built without VCS stamping) go1.26.8"},
		{"release", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-11-30T10:00:00Z"}, {Key: "vcs.modified", Value: "false"}}},
			"rlverify v1.4.0 (commit 0123abcd, 2026-11-30T10:00:00Z) go1.26.8"},
		{"modified tree", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "true"}}},
			"rlverify devel (commit 0123abcd, modified) go1.26.8"},
	} {
		t.Run(tc.name, func(t *testing.T) { require.Equal(t, tc.want, versionOf(tc.bi)) })
	}
}
