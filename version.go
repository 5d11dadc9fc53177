package rlverify

import (
	"fmt"
	"runtime/debug"
)

// Version is this build's "rlverify VERSION (commit REV[, modified], TIME)
// GOVERSION" (see versionOf).
func Version() string { return versionOf(readBuildInfo()) }

func readBuildInfo() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

// versionOf is "rlverify VERSION (commit REV[, modified], TIME) GOVERSION"
// from the build info: the module version (devel for a build of a work
// tree) and, when the build stamped it (go build -buildvcs), the commit.
func versionOf(bi *debug.BuildInfo) string {
	if bi == nil {
		return "rlverify (no build information)"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	set := map[string]string{}
	for _, s := range bi.Settings {
		set[s.Key] = s.Value
	}
	vcs := "commit unknown: built without VCS stamping"
	if rev := set["vcs.revision"]; rev != "" {
		vcs = "commit " + rev
		if set["vcs.modified"] == "true" {
			vcs += ", modified"
		}
		if t := set["vcs.time"]; t != "" {
			vcs += ", " + t
		}
	}
	return fmt.Sprintf("rlverify %s (%s) %s", v, vcs, bi.GoVersion)
}
