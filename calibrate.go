package rlverify

import (
	"errors"
	"fmt"
	"os"

	"github.com/rlverify/rlverify/calibrate"
	"github.com/rlverify/rlverify/policy"
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
