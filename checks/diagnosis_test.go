package checks

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func fail(name string, ev ...Evidence) Result {
	return Result{Name: name, Verdict: Fail, Summary: name + " failed", Evidence: ev}
}

func TestDiagnoseLinksViolationsThatShareEvidence(t *testing.T) {
	const W = int64(2e9)
	for _, tc := range []struct {
		name      string
		rs        []Result
		explained map[string]string // check → explained by
		defects   []string
	}{
		{"a shared request", []Result{
			fail("oversell", Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{1, 2, 3}}),
			fail("downstream", Evidence{Key: "other", RequestIDs: []uint64{3}}),
		}, map[string]string{"downstream": "oversell"}, []string{"oversell"}},
		{"the same key within one refill", []Result{
			fail("oversell", Evidence{Key: "k", From: 0, To: 10}),
			fail("token-bounds", Evidence{Key: "k", From: W, To: W + 10}),
		}, map[string]string{"token-bounds": "oversell"}, []string{"oversell"}},
		{"the same key, far apart: two defects", []Result{
			fail("oversell", Evidence{Key: "k", From: 0, To: 10}),
			fail("token-bounds", Evidence{Key: "k", From: 5 * W, To: 5*W + 10}),
		}, nil, []string{"oversell", "token-bounds"}},
		{"another key: two defects", []Result{
			fail("oversell", Evidence{Key: "a", From: 0, To: 10}),
			fail("retry-after", Evidence{Key: "b", From: 0, To: 10}),
		}, nil, []string{"oversell", "retry-after"}},
		{"a shared quota explains every symptom of its keys", []Result{
			fail("under-admission", Evidence{Key: "quiet", From: 9 * W, To: 9 * W}),
			fail("retry-after", Evidence{Key: "noisy", From: 20 * W, To: 20 * W}),
			fail("isolation", Evidence{Key: "quiet", Keys: []string{"quiet", "noisy"}, Cause: CauseSharedQuota, From: 1, To: 2}),
		}, map[string]string{"under-admission": "isolation", "retry-after": "isolation"}, []string{"isolation"}},
		{"every evidence item must be explained", []Result{
			fail("oversell", Evidence{Key: "k", RequestIDs: []uint64{1}}),
			fail("downstream", Evidence{Key: "x", RequestIDs: []uint64{1}}, Evidence{Key: "y", From: 1, To: 2, RequestIDs: []uint64{9}}),
		}, nil, []string{"oversell", "downstream"}},
		{"per-instance state: instances explains oversell", []Result{
			fail("oversell", Evidence{Key: "k", From: 0, To: 10}),
			fail("instances", Evidence{Key: "k", From: 0, To: 10, Cause: CausePerInstanceState}),
		}, map[string]string{"oversell": "instances"}, []string{"instances"}},
		{"a race: oversell explains instances", []Result{
			fail("instances", Evidence{Key: "k", From: 0, To: 10}),
			fail("oversell", Evidence{Key: "k", From: 0, To: 10}),
		}, map[string]string{"instances": "oversell"}, []string{"oversell"}},
		{"a missing header is a defect of its own, even on an overrun's requests", []Result{
			fail("oversell", Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{1, 2, 3}}),
			fail("headers", Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{2}, Cause: CauseMissingHeader}),
			fail("retry-after", Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{3}, Cause: CauseMissingHeader}),
		}, nil, []string{"oversell", "headers", "retry-after"}},
		{"an unusable Retry-After is a defect of its own, even beside a headers defect on the same request", []Result{
			fail("headers", Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{3}}),
			fail("retry-after", Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{3}, Cause: CauseInvalidHeader}),
		}, nil, []string{"headers", "retry-after"}},
		{"a valid but wrong Retry-After on a headers defect's request is explained", []Result{
			fail("headers", Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{3}}),
			fail("retry-after", Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{3}}),
		}, map[string]string{"retry-after": "headers"}, []string{"headers"}},
		{"a wrong header value on an overrun's request is the overrun's", []Result{
			fail("oversell", Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{1, 2, 3}}),
			fail("headers", Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{2}}),
		}, map[string]string{"headers": "oversell"}, []string{"oversell"}},
		{"one missing header among wrong values keeps the check a defect", []Result{
			fail("oversell", Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{1, 2, 3}}),
			fail("headers", Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{2}}, Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{3}, Cause: CauseMissingHeader}),
		}, nil, []string{"oversell", "headers"}},
		{"calibration's advice on an overrun key is the overrun's", []Result{
			fail("oversell", Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{1, 2, 3}}),
			fail(CalibrationCheck, Evidence{Key: "k", From: W / 2, To: W / 2, RequestIDs: []uint64{9}, Cause: CauseAdvice}),
		}, map[string]string{CalibrationCheck: "oversell"}, []string{"oversell"}},
		{"a measured parameter stays the cause of the overrun", []Result{
			fail("oversell", Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{1, 2, 3}}),
			fail(CalibrationCheck, Evidence{Key: "k", From: W / 2, To: W / 2, RequestIDs: []uint64{9}, Cause: CauseAdvice}, Evidence{Key: "k", From: 0, To: 10, RequestIDs: []uint64{3}}),
		}, map[string]string{"oversell": CalibrationCheck}, []string{CalibrationCheck}},
		{"an overrun after a fault that oversell proved before it is the race", []Result{
			fail("oversell", Evidence{Key: "k", From: 1, To: 10}, Evidence{Key: "k", From: 5 * W, To: 5*W + 10}),
			fail("fail-mode", Evidence{Key: "k", From: 5 * W, To: 5*W + 10, Cause: CauseAfterFault, FaultFrom: 3 * W}),
		}, map[string]string{"fail-mode": "oversell"}, []string{"oversell"}},
		{"an overrun only after the fault is credit from the downtime", []Result{
			fail("oversell", Evidence{Key: "k", From: 5 * W, To: 5*W + 10}),
			fail("fail-mode", Evidence{Key: "k", From: 5 * W, To: 5*W + 10, Cause: CauseAfterFault, FaultFrom: 3 * W}),
		}, map[string]string{"oversell": "fail-mode"}, []string{"fail-mode"}},
		{"another key's race does not explain an overrun after the fault", []Result{
			fail("oversell", Evidence{Key: "other", From: 1, To: 10}),
			fail("fail-mode", Evidence{Key: "k", From: 5 * W, To: 5*W + 10, Cause: CauseAfterFault, FaultFrom: 3 * W}),
		}, nil, []string{"fail-mode", "oversell"}},
		{"refusals that cost explain every key's unhonoured advice", []Result{
			fail("under-admission", Evidence{Key: "a", From: 1, To: 2, Cause: CauseSelfInflicted}, Evidence{Key: "a", Keys: []string{"a", "b"}, Cause: CauseSelfInflicted}),
			fail("retry-after", Evidence{Key: "b", From: 20 * W, To: 20 * W, RequestIDs: []uint64{7, 8}}),
		}, map[string]string{"retry-after": "under-admission"}, []string{"under-admission"}},
		{"the evidence gate is never a defect", []Result{
			{Name: EvidenceCheck, Verdict: Pass},
			fail("headers", Evidence{Key: "k", From: 0, To: 1}),
		}, nil, []string{"headers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := Diagnose(tc.rs, W)
			for _, r := range rs {
				if by, ok := tc.explained[r.Name]; ok {
					require.Equal(t, Explained, r.Verdict, r.Name)
					require.Equal(t, by, r.ExplainedBy, r.Name)
					require.Contains(t, r.Summary, "explained by "+by)
				} else if r.Name != EvidenceCheck {
					require.Equal(t, Fail, r.Verdict, r.Name)
				}
			}
			var got []string
			for _, d := range Defects(rs) {
				got = append(got, d.Check)
				for _, e := range d.Explains {
					require.Equal(t, d.Check, tc.explained[e])
				}
			}
			require.Equal(t, tc.defects, got)
		})
	}
}

func TestExplainedMergesBetweenPassAndUnknown(t *testing.T) {
	require.Equal(t, Explained, Merge(Pass, Explained))
	require.Equal(t, Unknown, Merge(Explained, Unknown))
	require.Equal(t, Fail, Merge(Explained, Fail))
	require.Equal(t, Explained, Overall([]Result{{Verdict: Pass}, {Verdict: Explained}}))
}
