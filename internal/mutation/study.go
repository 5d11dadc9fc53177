package mutation

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rlverify/rlverify"
	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/policy"
)

// Study judges mutants of one library served behind one shell.
type Study struct {
	Lab *Lab
	// Shell is the host package of the shell (./internal/mutation/cmd/shell);
	// it must print its base URL as its first line of output.
	Shell string
	// Policy is the shell's honest declared policy.
	Policy *policy.Policy
	// Plans, when set, are the audit's plans to run (default: all that
	// apply).
	Plans []string
	// Tests are the library's packages whose own tests judge each mutant
	// (none: the tests' column is not measured).
	Tests []string
	// TestTimeout bounds each test binary (a mutant may loop forever).
	TestTimeout time.Duration
	// Dir receives a folder per judged mutant (the shell's builds and the
	// audit's histories); a temporary directory when empty.
	Dir string
	// Log, when set, receives a line per step.
	Log func(format string, args ...any)
}

// Result is one judged mutant (or the unmutated library: Mutant nil).
type Result struct {
	Mutant *Mutant
	// Stillborn is a mutant that does not compile; nothing else is set.
	Stillborn bool
	// Verdict is the audit's verdict (fail, unknown or pass), Failing the
	// properties that did not pass (fail or unknown), in check order; a
	// shell that stopped answering is AuditError.
	Verdict    checks.Verdict
	Failing    []string
	AuditError string
	// Tests are the library's own tests' results (zero when not run).
	Tests   TestResult
	TestsRn bool
	// AuditTime and TestTime are wall-clock durations.
	AuditTime, TestTime time.Duration
}

// KilledByAudit reports whether the audit told the mutant from the
// library: any verdict but PASS, or a shell that stopped answering.
func (r Result) KilledByAudit() bool {
	return r.AuditError != "" || r.Verdict != checks.Pass
}

// KilledByTests reports whether the library's own tests failed.
func (r Result) KilledByTests() bool { return r.TestsRn && !r.Tests.Passed }

// AuditSays is the audit's column: PASS, or what it failed.
func (r Result) AuditSays() string {
	switch {
	case r.Stillborn:
		return "does not build"
	case r.AuditError != "":
		return "shell broke: " + r.AuditError
	case r.Verdict == checks.Pass:
		return "PASS"
	}
	return strings.ToUpper(string(r.Verdict)) + ": " + strings.Join(r.Failing, ", ")
}

func (s *Study) logf(format string, args ...any) {
	if s.Log != nil {
		s.Log(format, args...)
	}
}

// Judge builds the shell with m (nil: the unmutated library), audits it
// and runs the library's tests against it.
func (s *Study) Judge(ctx context.Context, m *Mutant) (Result, error) {
	res := Result{Mutant: m}
	name := "original"
	if m != nil {
		name = m.ID()
	}
	overlay, err := s.Lab.Overlay(m)
	if err != nil {
		return res, err
	}
	dir := s.Dir
	if dir == "" {
		dir = s.Lab.dir
	}
	work, err := os.MkdirTemp(dir, "judge-")
	if err != nil {
		return res, fmt.Errorf("mutation: %w", err)
	}
	bin := filepath.Join(work, "shell")
	if err := s.Lab.Build(ctx, overlay, s.Shell, bin); err != nil {
		var be *BuildError
		if errors.As(err, &be) {
			s.logf("%s: does not build", name)
			res.Stillborn = true
			return res, nil
		}
		return res, err
	}
	start := time.Now()
	if err := s.audit(ctx, bin, work, &res); err != nil {
		return res, fmt.Errorf("mutation: %s: %w", name, err)
	}
	res.AuditTime = time.Since(start)
	s.logf("%s: audit %s in %s", name, res.AuditSays(), res.AuditTime.Round(time.Second))
	if len(s.Tests) > 0 {
		start = time.Now()
		timeout := s.TestTimeout
		if timeout <= 0 {
			timeout = time.Minute
		}
		res.Tests, err = s.Lab.Test(ctx, overlay, timeout, s.Tests...)
		if err != nil {
			return res, err
		}
		res.TestsRn = true
		res.TestTime = time.Since(start)
		s.logf("%s: library tests passed=%v %s in %s", name, res.Tests.Passed, res.Tests.Failed, res.TestTime.Round(time.Second))
	}
	return res, nil
}

// audit starts the shell at bin, audits it and stops it.
func (s *Study) audit(ctx context.Context, bin, work string, res *Result) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(sctx, bin, "--addr", "127.0.0.1:0")
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the shell: %w", err)
	}
	exited := make(chan error, 1)
	defer func() {
		cancel()
		<-exited
	}()
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			url <- strings.TrimSpace(sc.Text())
		}
		close(url)
		_, _ = io.Copy(io.Discard, out)
		exited <- cmd.Wait()
	}()
	var target string
	select {
	case u, ok := <-url:
		if !ok {
			return errors.New("the shell exited before it listened")
		}
		target = u
	case <-time.After(30 * time.Second):
		return errors.New("the shell did not print its URL within 30s")
	}
	a, err := rlverify.Audit(ctx, rlverify.AuditOptions{
		Attack: rlverify.AttackOptions{Targets: []string{target}, Policy: s.Policy},
		Plans:  s.Plans,
		Dir:    filepath.Join(work, "audit"),
	})
	if err != nil {
		// A bad option is the study's own mistake; anything else is the
		// mutant's doing (a shell that crashed stops the audit as an
		// unreachable target).
		var oe *rlverify.OptionError
		if errors.As(err, &oe) || ctx.Err() != nil {
			return err
		}
		res.AuditError = firstLine(err.Error())
		return nil
	}
	res.Verdict = a.Verdict
	for _, p := range a.Properties {
		if p.Verdict == checks.Fail || p.Verdict == checks.Unknown {
			res.Failing = append(res.Failing, p.Name)
		}
	}
	slices.Sort(res.Failing)
	return nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return oneLine(s)
}
