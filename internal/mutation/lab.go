package mutation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Lab holds a writable copy of one module from the module cache and a
// go.mod for the host module (the one running the study) that replaces the
// module by the copy. The go command refuses overlays of files in the
// module cache; an overlay of the copy's files is allowed, so each mutant
// is built by `go build -modfile LAB/go.mod -overlay MUTANT.json` without
// touching the module cache, the copy or the host's go.mod.
type Lab struct {
	// Module is the library's module path, Version its version in the
	// host's build list.
	Module, Version string
	// Orig is the module's directory in the module cache (read only);
	// Copy is the writable copy.
	Orig, Copy string
	// Root is the host module's directory (where go commands run).
	Root string

	dir     string
	modfile string
	n       int
}

// NewLab copies module (as the host module at root resolves it) into a
// temporary directory. Close removes it.
func NewLab(ctx context.Context, root, module string) (*Lab, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-json", module)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("mutation: locate %s: %w", module, err)
	}
	var m struct{ Path, Version, Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("mutation: go list -m %s: %w", module, err)
	}
	if m.Dir == "" {
		return nil, fmt.Errorf("mutation: %s@%s is not in the module cache (run go mod download %s)", module, m.Version, module)
	}
	dir, err := os.MkdirTemp("", "rlverify-mutation-")
	if err != nil {
		return nil, fmt.Errorf("mutation: %w", err)
	}
	l := &Lab{Module: m.Path, Version: m.Version, Orig: m.Dir, Copy: filepath.Join(dir, "module"), Root: root, dir: dir, modfile: filepath.Join(dir, "go.mod")}
	if err := l.setup(); err != nil {
		_ = l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Lab) setup() error {
	if err := os.CopyFS(l.Copy, os.DirFS(l.Orig)); err != nil {
		return fmt.Errorf("mutation: copy %s: %w", l.Orig, err)
	}
	// The cache's files are read-only; the copy's directories must let
	// Close remove them.
	if err := filepath.WalkDir(l.Copy, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(p, mode)
	}); err != nil {
		return fmt.Errorf("mutation: %w", err)
	}
	mod, err := os.ReadFile(filepath.Join(l.Root, "go.mod"))
	if err != nil {
		return fmt.Errorf("mutation: %w", err)
	}
	sum, err := os.ReadFile(filepath.Join(l.Root, "go.sum"))
	if err != nil {
		return fmt.Errorf("mutation: %w", err)
	}
	mod = fmt.Appendf(mod, "\nreplace %s => %s\n", l.Module, l.Copy)
	if err := os.WriteFile(l.modfile, mod, 0o644); err != nil {
		return fmt.Errorf("mutation: %w", err)
	}
	// -modfile X.mod reads its sums from X.sum.
	if err := os.WriteFile(strings.TrimSuffix(l.modfile, ".mod")+".sum", sum, 0o644); err != nil {
		return fmt.Errorf("mutation: %w", err)
	}
	return nil
}

// Close removes the lab's files.
func (l *Lab) Close() error { return os.RemoveAll(l.dir) }

// Source is file (slash path inside the module) as the module holds it.
func (l *Lab) Source(file string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(l.Orig, filepath.FromSlash(file)))
	if err != nil {
		return nil, fmt.Errorf("mutation: %w", err)
	}
	return b, nil
}

// Overlay writes m's mutated file and an overlay replacing the copy's file
// by it, and returns the overlay's path ("" for nil: the unmutated module).
func (l *Lab) Overlay(m *Mutant) (string, error) {
	if m == nil {
		return "", nil
	}
	src, err := l.Source(m.File)
	if err != nil {
		return "", err
	}
	mut, err := m.Apply(src)
	if err != nil {
		return "", err
	}
	l.n++
	d := filepath.Join(l.dir, fmt.Sprintf("mutant-%d", l.n))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", fmt.Errorf("mutation: %w", err)
	}
	file := filepath.Join(d, filepath.Base(m.File))
	if err := os.WriteFile(file, mut, 0o644); err != nil {
		return "", fmt.Errorf("mutation: %w", err)
	}
	ov, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(l.Copy, filepath.FromSlash(m.File)): file}})
	if err != nil {
		return "", fmt.Errorf("mutation: %w", err)
	}
	path := filepath.Join(d, "overlay.json")
	if err := os.WriteFile(path, ov, 0o644); err != nil {
		return "", fmt.Errorf("mutation: %w", err)
	}
	return path, nil
}

func (l *Lab) flags(overlay string) []string {
	f := []string{"-modfile", l.modfile}
	if overlay != "" {
		f = append(f, "-overlay", overlay)
	}
	return f
}

// BuildError is a mutant that does not compile (a stillborn mutant).
type BuildError struct{ Output string }

func (e *BuildError) Error() string { return "mutation: build failed:\n" + e.Output }

// Build builds the host's package pkg (e.g. ./internal/mutation/cmd/shell)
// against the library with overlay applied, into out.
func (l *Lab) Build(ctx context.Context, overlay, pkg, out string) error {
	args := append(append([]string{"build"}, l.flags(overlay)...), "-o", out, pkg)
	if b, err := goCmd(ctx, l.Root, args...); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return &BuildError{Output: string(b)}
		}
		return fmt.Errorf("mutation: go build %s: %w", pkg, err)
	}
	return nil
}

// TestResult is what the library's own tests said.
type TestResult struct {
	// Passed is true when every test passed.
	Passed bool
	// Failed names the first failing test (or "timeout", "build").
	Failed string
	Output string
}

// Test runs the library's own tests of pkgs (import paths) against the
// library with overlay applied, each test binary bounded by timeout.
func (l *Lab) Test(ctx context.Context, overlay string, timeout time.Duration, pkgs ...string) (TestResult, error) {
	args := append(append([]string{"test", "-count=1", "-timeout", timeout.String()}, l.flags(overlay)...), pkgs...)
	b, err := goCmd(ctx, l.Root, args...)
	out := string(b)
	if err == nil {
		return TestResult{Passed: true, Output: out}, nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return TestResult{}, fmt.Errorf("mutation: go test: %w", err)
	}
	return TestResult{Failed: firstFailure(out), Output: out}, nil
}

// firstFailure names the first failing test of go test's output.
func firstFailure(out string) string {
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if name, ok := strings.CutPrefix(line, "--- FAIL: "); ok {
			name, _, _ = strings.Cut(name, " ")
			return name
		}
		if strings.HasPrefix(line, "panic: test timed out") {
			return "timeout"
		}
		if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
			return "panic"
		}
		if strings.Contains(line, "[build failed]") || strings.Contains(line, "[setup failed]") {
			return "build"
		}
	}
	return "failed"
}

// goCmd runs the go command in dir and returns its combined output.
func goCmd(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.Bytes(), err
}
