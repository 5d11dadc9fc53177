package rlverify

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rlverify/rlverify/calibrate"
	"github.com/rlverify/rlverify/limiters/catalog"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
)

// CalibrateOptions say which traffic to calibrate a policy on and how to
// read it. Files and Inputs are read in that order; at least one is
// needed. Read.Format and, for access logs, Read.KeyField or Read.KeyRegex
// are required.
type CalibrateOptions struct {
	// Files are paths of access logs, results or histories (gzip or not).
	Files []string
	// Inputs are streams already open (standard input).
	Inputs []calibrate.Input
	// Read says the format, where the key is, and how strict to be.
	Read calibrate.ReadOptions
	// Calibrate says the candidate policy (default: the built-in policy),
	// the target and the abusive traffic.
	Calibrate calibrate.Options
}

// Calibrate reads recorded traffic and replays it through the reference
// limiters of the candidate policy in simulated time: what the policy
// would refuse, per tier, which keys and which minutes, and the smallest
// numbers that keep refusals of legitimate traffic within the target.
// Errors about the traffic's content are *calibrate.InputError.
// calibrate.Recommend turns the report into a policy file.
func Calibrate(o CalibrateOptions) (*calibrate.Report, error) {
	if o.Calibrate.Policy == nil {
		o.Calibrate.Policy = policy.Default()
	}
	if o.Read.Policy == nil {
		o.Read.Policy = o.Calibrate.Policy
	}
	if len(o.Files)+len(o.Inputs) == 0 {
		return nil, errors.New("rlverify: calibrate: no traffic: give files or inputs")
	}
	var inputs []calibrate.Input
	for _, name := range o.Files {
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("rlverify: calibrate: %w", err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			return nil, fmt.Errorf("rlverify: calibrate: %s is a directory, not a log file", name)
		}
		inputs = append(inputs, calibrate.Input{Name: name, R: f})
	}
	inputs = append(inputs, o.Inputs...)
	t, err := calibrate.Read(inputs, o.Read)
	if err != nil {
		return nil, err
	}
	return calibrate.Calibrate(t, o.Calibrate)
}

// CalibrateText are calibrate's settings as a user writes them; Apply
// reads and checks them into CalibrateOptions. Errors are *OptionError
// naming the field.
type CalibrateText struct {
	// MaxRefused and MaxRefusedPerKey are shares below 100%: 0.1% or 0.001
	// (MaxRefused 0 means refuse none; an empty MaxRefusedPerKey, no bound).
	MaxRefused, MaxRefusedPerKey string
	// AbusiveKeys are keys, or @FILE with one key a line (# comments).
	AbusiveKeys []string
	// AbusiveStatus are statuses (401,403 or 400-499).
	AbusiveStatus []string
	// Compare are reference limiters to replay beside the policy:
	// NAME:capacity=K,rate=R or NAME:limit=N,window=W.
	Compare []string
	// KeyRegex is a regular expression on the raw line whose first group
	// is the key.
	KeyRegex string
	// Reports are FORMAT (to stdout, one at most) or FORMAT=FILE
	// (calibrate.ReportFormats); WritePolicy is a file for the candidate
	// with the recommended numbers. Existing files are replaced only with
	// Force.
	Reports     []string
	WritePolicy string
	Force       bool
}

// CalibrateOutput is one report of a calibration: its format, and its
// file ("" for stdout).
type CalibrateOutput struct{ Format, File string }

// Outputs reads t.Reports and checks t.WritePolicy.
func (t CalibrateText) Outputs() ([]CalibrateOutput, error) {
	var outs []CalibrateOutput
	toStdout := 0
	for _, r := range t.Reports {
		format, file, _ := strings.Cut(r, "=")
		if !slices.Contains(calibrate.ReportFormats(), format) {
			return nil, fieldErr("Reports", "%q: want FORMAT or FORMAT=FILE with FORMAT one of %s", r, strings.Join(calibrate.ReportFormats(), ", "))
		}
		if file == "" {
			toStdout++
		} else if err := refuseOverwrite("Reports", file, t.Force); err != nil {
			return nil, err
		}
		outs = append(outs, CalibrateOutput{format, file})
	}
	if toStdout > 1 {
		return nil, fieldErr("Reports", "only one format can go to stdout; give the others as FORMAT=FILE")
	}
	if t.WritePolicy != "" {
		if err := refuseOverwrite("WritePolicy", t.WritePolicy, t.Force); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// refuseOverwrite refuses an existing file unless force.
func refuseOverwrite(field, file string, force bool) error {
	st, err := os.Stat(file)
	switch {
	case err == nil && st.IsDir():
		return fieldErr(field, "%s is a directory", file)
	case err == nil && !force:
		return fieldErr(field, "%s already exists: give another file, or Force to replace it", file)
	}
	return nil
}

// WriteCalibration writes rep in every output (stdout for one without a
// file), each file whole or not at all, and with t.WritePolicy the
// candidate o's policy with the recommended numbers.
func (t CalibrateText) WriteCalibration(rep *calibrate.Report, o CalibrateOptions, outs []CalibrateOutput, stdout io.Writer) error {
	for _, out := range outs {
		if out.File == "" {
			if err := calibrate.Render(stdout, rep, out.Format); err != nil {
				return err
			}
			continue
		}
		if err := reports.WriteFile(out.File, func(w io.Writer) error { return calibrate.Render(w, rep, out.Format) }); err != nil {
			return fmt.Errorf("report %s: %w", out.File, err)
		}
	}
	if t.WritePolicy == "" {
		return nil
	}
	_, yml, err := calibrate.Recommend(o.Calibrate.Policy, rep)
	if err != nil {
		return err
	}
	if err := reports.WriteFile(t.WritePolicy, func(w io.Writer) error { _, err := w.Write(yml); return err }); err != nil {
		return fmt.Errorf("policy %s: %w", t.WritePolicy, err)
	}
	return nil
}

// Apply reads t into o and checks o's reading options.
func (t CalibrateText) Apply(o *CalibrateOptions) error {
	if !slices.Contains(calibrate.Formats(), o.Read.Format) {
		return fieldErr("Read.Format", "%q: want %s", o.Read.Format, strings.Join(calibrate.Formats(), ", "))
	}
	if o.Read.MaxDisorder <= 0 {
		return fieldErr("Read.MaxDisorder", "%s: want a positive duration", o.Read.MaxDisorder)
	}
	if t.KeyRegex != "" {
		re, err := regexp.Compile(t.KeyRegex)
		if err != nil {
			return fieldErr("KeyRegex", "%q: %w", t.KeyRegex, err)
		}
		o.Read.KeyRegex = re
	}
	share, err := parseShare("MaxRefused", t.MaxRefused)
	if err != nil {
		return err
	}
	o.Calibrate.MaxRefused, o.Calibrate.ExactlyZero = share, share == 0
	if t.MaxRefusedPerKey != "" {
		if o.Calibrate.MaxRefusedPerKey, err = parseShare("MaxRefusedPerKey", t.MaxRefusedPerKey); err != nil {
			return err
		}
	}
	if o.Calibrate.AbusiveKeys, err = readKeyList(t.AbusiveKeys); err != nil {
		return &OptionError{Field: "AbusiveKeys", Err: err}
	}
	if len(t.AbusiveStatus) > 0 {
		if o.Calibrate.AbusiveStatuses, err = policy.ParseStatusSet(t.AbusiveStatus...); err != nil {
			return &OptionError{Field: "AbusiveStatus", Err: err}
		}
	}
	for _, spec := range t.Compare {
		_, entry, l, err := catalog.ParseLimit(spec)
		if err != nil {
			return &OptionError{Field: "Compare", Err: err}
		}
		if entry.Faulty || entry.ThirdParty || entry.Name != string(entry.Algorithm) {
			var names []string
			for _, a := range policy.Algorithms {
				names = append(names, string(a))
			}
			return fieldErr("Compare", "%q: calibrate replays the reference algorithms (%s)", spec, strings.Join(names, ", "))
		}
		o.Calibrate.Compare = append(o.Calibrate.Compare, l)
	}
	if m := o.Calibrate.TimelineMax; m < 1 || m > 100_000 {
		return fieldErr("Calibrate.TimelineMax", "%d: want 1 … 100000", m)
	}
	return nil
}

// parseShare reads 0.1% or 0.001.
func parseShare(field, s string) (float64, error) {
	s = strings.TrimSpace(s)
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if pct {
		v /= 100
	}
	if err != nil || v < 0 || v >= 1 || v != v {
		return 0, fieldErr(field, "%q: want a share below 100%%, as 0.1%% or 0.001", s)
	}
	return v, nil
}

// readKeyList expands @FILE items into the file's lines.
func readKeyList(items []string) ([]string, error) {
	var out []string
	for _, it := range items {
		file, ok := strings.CutPrefix(it, "@")
		if !ok {
			out = append(out, it)
			continue
		}
		fh, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if k := strings.TrimSpace(sc.Text()); k != "" && !strings.HasPrefix(k, "#") {
				out = append(out, k)
			}
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	return out, nil
}
