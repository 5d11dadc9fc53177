package rlverify_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/rlverify/rlverify"

// allowed is docs/architecture.md's direction of imports: each package of
// the module and the packages of the module it may import. A package that
// is not here fails the test until it is placed (in the doc and here).
// The test and tool helpers (helpers) may import anything below cmd.
var allowed = map[string][]string{
	// leaves
	"policies": nil, "history": {"headers"}, "headers": nil, "limitread": nil,
	"policy/yamlx": {"limitread", "internal/suggest"}, "policy": {"policy/yamlx", "limitread"}, "internal/suggest": nil,
	"envs/redisproc": {"internal/childproc"}, "internal/faultproxy": nil, "internal/human": nil, "internal/childproc": nil, "internal/prose": nil,
	"thresholds": {"history", "internal/human"},
	"faults":     {"history"},
	// algorithms and stores
	"limiters":            {"policy"},
	"limiters/faulty":     {"limiters", "policy"},
	"limiters/thirdparty": {"limiters", "policy"},
	"limiters/catalog":    {"limiters", "limiters/faulty", "limiters/thirdparty", "policy", "internal/suggest"},
	"checks":              {"history", "policy", "headers"},
	"attacks":             {"history", "policy", "policy/yamlx", "headers", "thresholds", "faults", "internal/suggest"},
	"importers":           {"history", "policy", "headers"},
	"envoyrls":            {"headers"},
	"discover":            {"attacks", "history", "policy", "headers"},
	"calibrate":           {"history", "importers", "limiters", "policy"},
	"reports":             {"checks", "history", "policy", "thresholds", "internal/human", "limitread"},
	"service":             {"limiters", "limiters/catalog", "policy", "headers", "history", "internal/faultproxy", "limitread", "faults"},
	"envs":                {"service", "limiters", "limiters/catalog", "policy", "history", "envs/redisproc", "internal/faultproxy", "internal/childproc", "faults"},
	"envs/docker":         {"envs", "service", "limiters", "limiters/catalog", "policy", "history", "envs/redisproc", "faults"},
	"envs/gateway":        {"envs", "service", "limiters", "limiters/catalog", "policy", "history", "envs/redisproc", "internal/childproc", "faults"},
	"":                    {"attacks", "calibrate", "checks", "discover", "envoyrls", "envs", "envs/gateway", "faults", "history", "importers", "limiters/catalog", "policies", "policy", "reports", "service", "thresholds", "internal/suggest"},
	"rlverifytest":        {"", "attacks", "checks", "policy", "reports"},
	"internal/console":    {"attacks", "reports", "internal/human"},
	"compose":             nil,
	"deploy/kubernetes":   nil,
}

// helpers are packages only tests, benchmarks and tools import.
var helpers = []string{"internal/envtest", "internal/testsvc", "internal/matrix", "internal/bench", "internal/mutation"}

// cliOnly are modules only commands (cmd/…) and their terminal output
// (internal/console, which only commands import) may import.
var cliOnly = []string{"github.com/spf13/cobra", "github.com/spf13/pflag", "github.com/vbauerster/mpb"}

// dockerOnly are modules only envs/docker (and the CLI, through it) may
// pull in.
var dockerOnly = []string{"github.com/testcontainers/", "github.com/moby/", "github.com/docker/"}

// pure packages judge data: no network, no files, no processes (time is
// used for durations; the clock is never read — see DESIGN.md).
var pure = map[string][]string{
	"checks": {"net", "net/http", "os", "os/exec", "io/fs"},
}

type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func goList(t *testing.T, args ...string) []listed {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command("go", append([]string{"list", "-json"}, args...)...).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
	}
	require.NoError(t, err)
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// optionalTags are the build tags of the optional parts (docs/architecture.md,
// "Optional parts"): the files they add follow the same rules.
const optionalTags = "docker,gubernator"

func TestImportsFollowTheArchitecture(t *testing.T) {
	for _, p := range append(goList(t, "./..."), goList(t, "-tags", optionalTags, "./...")...) {
		name, _ := rel(p.ImportPath)
		cmd := strings.HasPrefix(name, "cmd/") || strings.Contains(name, "/cmd/")
		for _, imp := range p.Imports {
			if !cmd && name != "internal/console" && slices.ContainsFunc(cliOnly, func(m string) bool { return strings.HasPrefix(imp, m) }) {
				t.Errorf("%s imports %s: only commands read flags", p.ImportPath, imp)
			}
			if name != "envs/docker" && !cmd && slices.ContainsFunc(dockerOnly, func(m string) bool { return strings.HasPrefix(imp, m) }) {
				t.Errorf("%s imports %s: Docker belongs to envs/docker", p.ImportPath, imp)
			}
		}
		if cmd || slices.Contains(helpers, name) {
			continue // commands and helpers may import anything below cmd
		}
		if slices.Contains(p.Imports, module+"/internal/console") {
			t.Errorf("%s imports internal/console: only commands show a terminal", p.ImportPath)
		}
		for _, imp := range p.Imports {
			if slices.Contains(pure[name], imp) {
				t.Errorf("%s imports %s: it must stay pure", p.ImportPath, imp)
			}
		}
		allow, known := allowed[name]
		if !known {
			t.Errorf("package %q is not in docs/architecture.md's direction of imports (add it there and to this test's table)", p.ImportPath)
			continue
		}
		for _, imp := range p.Imports {
			r, ours := rel(imp)
			if ours && !slices.Contains(allow, r) {
				t.Errorf("%s imports %s, against docs/architecture.md (it may import: %s)", p.ImportPath, imp, strings.Join(allow, ", "))
			}
		}
	}
}

func TestTheLibraryPullsInNoDocker(t *testing.T) {
	for _, p := range goList(t, "-deps=false", ".", "./rlverifytest") {
		deps := goList(t, "-deps", p.ImportPath)
		for _, d := range deps {
			if slices.ContainsFunc(dockerOnly, func(m string) bool { return strings.HasPrefix(d.ImportPath, m) }) {
				t.Errorf("%s depends on %s: importing the library must not pull in Docker", p.ImportPath, d.ImportPath)
			}
		}
	}
}

// heavy are the modules the default binary leaves to tagged builds: the
// gubernator cluster (gRPC, etcd, the Kubernetes client), Docker
// (testcontainers, moby) and the Toxiproxy server (internal/faultproxy is
// the one fault proxy).
var heavy = []string{"k8s.io/", "sigs.k8s.io/", "github.com/gubernator-io/", "google.golang.org/grpc", "go.etcd.io/",
	"github.com/testcontainers/", "github.com/moby/", "github.com/docker/", "github.com/Shopify/toxiproxy"}

// maxDefaultDeps bounds the default binary's packages (345 when the heavy
// parts moved out, from 995): a new dependency that drags a tree in fails
// here, where it is cheap to see, not in a user's 16-minute first build.
const maxDefaultDeps = 400

func TestDefaultBuildIsLean(t *testing.T) {
	deps := goList(t, "-deps", "./cmd/rlverify")
	for _, d := range deps {
		if slices.ContainsFunc(heavy, func(m string) bool { return strings.HasPrefix(d.ImportPath, m) }) {
			t.Errorf("the default rlverify depends on %s: it belongs behind a build tag (docs/architecture.md, Optional parts)", d.ImportPath)
		}
	}
	require.LessOrEqual(t, len(deps), maxDefaultDeps, "go list -deps ./cmd/rlverify")
}

// flagAllowed are the flag-like words the library's strings may hold, by
// file: arguments of the programs it starts (redis-server, redis-cli, the
// rlverify image's containers), other tools' flags a message quotes, CSS
// custom properties, and histories written before fields were named. "*"
// allows any in that file. The library's own messages name option fields
// (MaxDuration, Checks.Slack); the command says them as flags.
var flagAllowed = map[string][]string{
	"envs/redisproc/redisproc.go": {"--bind", "--port", "--save", "--appendonly", "--cluster-enabled", "--cluster-config-file", "--dir",
		"--cluster-node-timeout", "--cluster", "--cluster-replicas", "--cluster-yes", "--maxmemory"}, // redis-server, redis-cli
	"envs/docker/docker.go":       {"--config", "--addr"}, // the container's command
	"envs/docker/docker_image.go": {"--addr"},             // the image's CMD
	"envs/gateway/process.go":     {"--test"},             // scripts/install.sh --test
	"importers/vegeta.go":         {"--to"},               // vegeta encode --to json
	"importers/k6.go":             {"--out", "--system-tags"},
	"history/history.go":          {"--max-"}, // reasonBoundV1: older histories
	"reports/htmlassets.go":       {"*"},      // CSS custom properties
}

var flagLike = regexp.MustCompile(`(^|[^\w-])(--[a-z][a-z-]*)`)

// TestLibraryStringsNameNoFlags reads every string literal of the library
// (below cmd/, outside internal/ and examples/, tests aside) and fails on a
// flag name not on flagAllowed: the library names option fields, and one
// table in cmd/rlverify says them as flags.
func TestLibraryStringsNameNoFlags(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == "cmd" || path == "internal" || path == "examples" || path == "testdata" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		allow := flagAllowed[filepath.ToSlash(path)]
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				s = lit.Value
			}
			for _, m := range flagLike.FindAllStringSubmatch(s, -1) {
				if !slices.Contains(allow, m[2]) && !slices.Contains(allow, "*") {
					t.Errorf("%s: %s names the flag %s: name the option's field instead (the command's table, cmd/rlverify/flags.go, says it as a flag), or allow it in flagAllowed if it is another program's", fset.Position(lit.Pos()), lit.Value, m[2])
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
}
