package history

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A bound the caller chose completes a run, whether the history names it
// by the option's field (ReasonBound) or, written before, by the command's
// flag; a signal or a step that could not be done cuts it.
func TestCompletion(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  *End
		want Completion
	}{
		{"no end record", nil, CutBySignal},
		{"ran to its end", &End{}, Complete},
		{"request bound", &End{Interrupted: true, Reason: ReasonBound + "MaxRequests 500"}, Complete},
		{"duration bound", &End{Interrupted: true, Reason: ReasonBound + "MaxDuration 10s"}, Complete},
		{"bound named by a flag (older histories)", &End{Interrupted: true, Reason: "stopped at --max-requests 500"}, Complete},
		{"signal", &End{Interrupted: true, Reason: ReasonSignal + "context canceled"}, CutBySignal},
		{"a step failed", &End{Interrupted: true, Reason: "fault hook failed"}, CutShort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := (&History{End: tc.end}).Completion()
			require.Equal(t, tc.want, got)
		})
	}
}
