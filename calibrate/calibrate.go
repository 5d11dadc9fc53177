package calibrate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/rlverify/rlverify/policy"
)

// DefaultMaxRefused is the default target: at most 0.1% of a tier's
// legitimate requests refused.
const DefaultMaxRefused = 0.001

// DefaultTimelineMax is how many arrivals of the worst key the timeline
// shows by default.
const DefaultTimelineMax = 200

// Options say what to calibrate. Policy is required.
type Options struct {
	// Policy is the candidate: its tiers (by key prefix) group the keys,
	// and its limits are replayed as declared and are the starting point of
	// every search (the declared rate when searching K, and so on).
	Policy *policy.Policy
	// MaxRefused is the target: the largest share of a tier's legitimate
	// requests the recommended numbers may refuse (0.001 = 0.1%); zero
	// means DefaultMaxRefused unless ExactlyZero.
	MaxRefused float64
	// ExactlyZero makes a zero MaxRefused mean "refuse none".
	ExactlyZero bool
	// MaxRefusedPerKey, when > 0, also bounds the share of any one
	// legitimate key's requests refused.
	MaxRefusedPerKey float64
	// AbusiveKeys and AbusiveStatuses mark traffic as abusive: every
	// request of those keys, and requests answered with those statuses.
	// Abusive requests still pass through the limiter (they use up its
	// quota, as they did in production) but are not legitimate: the target
	// counts only legitimate refusals, and the report says how much of the
	// abusive traffic each policy refuses.
	AbusiveKeys     []string
	AbusiveStatuses policy.StatusSet
	// Compare are more limits to replay on every tier beside the declared
	// one and each family at the declared numbers (the seeds' comparison:
	// sliding-log N=5 W=1s against a token bucket K=5 r=2/s).
	Compare []policy.Limit
	// TimelineKey picks the key whose arrivals the timeline shows (default:
	// the legitimate key the declared policy refuses most).
	TimelineKey string
	// TimelineMax bounds the timeline's rows (default DefaultTimelineMax).
	TimelineMax int
	// Curves turns on the refusal curves over K, N and r (the HTML page's
	// figure); each point is one replay of the keys that need it.
	Curves bool
}

// Report is what calibrate found. Times are RFC 3339; shares are
// fractions of legitimate (or abusive) requests.
type Report struct {
	Policy     string        `json:"policy"`
	MaxRefused float64       `json:"max_refused"`
	PerKey     float64       `json:"max_refused_per_key,omitempty"`
	Files      []FileSummary `json:"files"`
	Malformed  []Malformed   `json:"malformed,omitempty"`
	Requests   int           `json:"requests"`
	Keys       int           `json:"keys"`
	First      time.Time     `json:"first"`
	Last       time.Time     `json:"last"`
	// NoTier counts keys (and their requests) no tier of the policy takes:
	// they are not replayed.
	NoTierKeys     int          `json:"no_tier_keys,omitempty"`
	NoTierRequests int          `json:"no_tier_requests,omitempty"`
	Routes         []RouteCount `json:"routes,omitempty"`
	Tiers          []TierReport `json:"tiers"`
	Notes          []string     `json:"notes,omitempty"`
}

// RouteCount is the requests of one route (path without query).
type RouteCount struct {
	Route    string `json:"route"`
	Requests int    `json:"requests"`
}

// TierReport is one tier's traffic and numbers.
type TierReport struct {
	Tier     string         `json:"tier"`
	Keys     int            `json:"keys"`
	Requests int            `json:"requests"`
	Legit    int            `json:"legitimate"`
	Abusive  int            `json:"abusive"`
	Declared []policy.Limit `json:"declared"`
	// Refused is what the declared limits (all of them, together) refuse.
	Refused      Outcome       `json:"refused"`
	TopKeys      []KeyRefusal  `json:"top_keys,omitempty"`
	WorstMinutes []Minute      `json:"worst_minutes,omitempty"`
	Recommended  []Recommended `json:"recommended"`
	Compare      []Comparison  `json:"compare"`
	Curves       []Curve       `json:"curves,omitempty"`
	Timeline     *Timeline     `json:"timeline,omitempty"`
}

// Outcome counts refusals of legitimate and abusive requests.
type Outcome struct {
	Legit        int     `json:"legitimate"`
	LegitShare   float64 `json:"legitimate_share"`
	Abusive      int     `json:"abusive"`
	AbusiveShare float64 `json:"abusive_share"`
}

// KeyRefusal is one key's legitimate requests and refusals.
type KeyRefusal struct {
	Key      string  `json:"key"`
	Requests int     `json:"requests"`
	Refused  int     `json:"refused"`
	Share    float64 `json:"share"`
}

// Minute is one of the minutes with the most legitimate refusals, and the
// burst that caused most of them: the key refused most in it, its requests
// in that minute and its busiest second.
type Minute struct {
	Start       time.Time `json:"start"`
	Refused     int       `json:"refused"`
	Key         string    `json:"key"`
	KeyRefused  int       `json:"key_refused"`
	KeyRequests int       `json:"key_requests"`
	PeakSecond  int       `json:"peak_second"`
	PeakAt      time.Time `json:"peak_at"`
}

// Recommended is the result of one search: the smallest Param (capacity,
// limit) or the smallest rate / largest window that keeps this tier's
// refusals within the target, the other parameter held as declared.
type Recommended struct {
	LimitName string           `json:"limit"`
	Algorithm policy.Algorithm `json:"algorithm"`
	// Param is capacity (K at the declared r), rate (r at the declared K),
	// limit (N at the declared W) or window (W at the declared N).
	Param    string `json:"param"`
	Declared string `json:"declared"`
	Value    string `json:"value"`
	// Limit is the recommended limit, both views filled; zero when not
	// Found.
	Limit policy.Limit `json:"numbers"`
	Found bool         `json:"found"`
	// Why says why nothing was found, or what limits a found value.
	Why     string  `json:"why,omitempty"`
	Refused Outcome `json:"refused"`
	// Replays is how many replays the search ran (keys that cannot be
	// refused are skipped in each).
	Replays int `json:"replays"`
}

// Comparison is one algorithm on the tier's traffic.
type Comparison struct {
	Name    string       `json:"name"`
	Limit   policy.Limit `json:"numbers"`
	Refused Outcome      `json:"refused"`
	// Disagree counts requests decided otherwise than by the declared
	// limits.
	Disagree int `json:"disagree"`
}

// Curve is refusal shares over one parameter.
type Curve struct {
	Algorithm policy.Algorithm `json:"algorithm"`
	Param     string           `json:"param"`
	Points    []Point          `json:"points"`
}

// Point is one replay of a curve.
type Point struct {
	X     float64 `json:"x"`
	Label string  `json:"label"`
	Share float64 `json:"share"`
}

// Timeline is one key's arrivals and each compared limiter's decision.
type Timeline struct {
	Key     string        `json:"key"`
	Start   time.Time     `json:"start"`
	Columns []string      `json:"columns"`
	Rows    []TimelineRow `json:"rows"`
	// Skipped counts arrivals before the first row; More after the last.
	Skipped int `json:"skipped,omitempty"`
	More    int `json:"more,omitempty"`
}

// TimelineRow is one arrival: seconds since Timeline.Start, and per column
// whether it is admitted.
type TimelineRow struct {
	At      float64 `json:"at"`
	Abusive bool    `json:"abusive,omitempty"`
	Allowed []bool  `json:"allowed"`
}

// Calibrate replays t through the policy in o and searches the numbers.
func Calibrate(t *Traffic, o Options) (*Report, error) {
	if o.Policy == nil {
		return nil, errors.New("calibrate: no policy: give the candidate policy (its tiers group the keys)")
	}
	if o.MaxRefused < 0 || o.MaxRefused >= 1 || math.IsNaN(o.MaxRefused) {
		return nil, fmt.Errorf("calibrate: max refused %g: want a share in [0, 1) (0.001 is 0.1%%)", o.MaxRefused)
	}
	if o.MaxRefused == 0 && !o.ExactlyZero {
		o.MaxRefused = DefaultMaxRefused
	}
	if o.MaxRefusedPerKey < 0 || o.MaxRefusedPerKey >= 1 || math.IsNaN(o.MaxRefusedPerKey) {
		return nil, fmt.Errorf("calibrate: max refused per key %g: want a share in [0, 1)", o.MaxRefusedPerKey)
	}
	if o.TimelineMax <= 0 {
		o.TimelineMax = DefaultTimelineMax
	}
	for i, l := range o.Compare {
		if _, err := normalized(l); err != nil {
			return nil, fmt.Errorf("calibrate: compared limit %d: %w", i+1, err)
		}
	}
	first, last := t.Span()
	r := &Report{
		Policy: o.Policy.Source, MaxRefused: o.MaxRefused, PerKey: o.MaxRefusedPerKey,
		Files: t.Files, Malformed: t.Malformed, Requests: t.Requests(), Keys: t.Keys(),
		First: time.Unix(0, first).UTC(), Last: time.Unix(0, last).UTC(),
	}
	for route, n := range t.routes {
		r.Routes = append(r.Routes, RouteCount{route, n})
	}
	sort.Slice(r.Routes, func(i, j int) bool {
		return r.Routes[i].Requests > r.Routes[j].Requests || r.Routes[i].Requests == r.Routes[j].Requests && r.Routes[i].Route < r.Routes[j].Route
	})
	if len(r.Routes) > 10 {
		r.Routes = r.Routes[:10]
	}
	abusiveKey := map[string]bool{}
	for _, k := range o.AbusiveKeys {
		abusiveKey[k] = true
	}
	groups := make([]group, len(o.Policy.Tiers))
	for k, key := range t.keys {
		tier, ok := o.Policy.TierFor(key)
		if logged := t.tiers[k]; logged != "" {
			if tier, ok = o.Policy.Tier(logged); !ok {
				return nil, fmt.Errorf("calibrate: %s: key %q has tier %q, which policy %s does not have (%s)", t.tierLine[k], safe(key), safe(logged), o.Policy.Source, strings.Join(o.Policy.TierNames(), ", "))
			}
		}
		if !ok {
			r.NoTierKeys++
			r.NoTierRequests += len(t.times[k])
			continue
		}
		ti := slices.IndexFunc(o.Policy.Tiers, func(x policy.Tier) bool { return x.Name == tier.Name })
		g := &groups[ti]
		var ab []bool
		legit := len(t.times[k])
		switch {
		case abusiveKey[key]:
			ab = make([]bool, legit)
			for j := range ab {
				ab[j] = true
			}
			legit = 0
		case len(o.AbusiveStatuses) > 0:
			for j, st := range t.status[k] {
				if o.AbusiveStatuses.Has(int(st)) {
					if ab == nil {
						ab = make([]bool, len(t.times[k]))
					}
					ab[j] = true
					legit--
				}
			}
		}
		g.keys = append(g.keys, int32(k))
		g.abusive = append(g.abusive, ab)
		g.legit = append(g.legit, legit)
		g.legitTotal += legit
		g.abTotal += len(t.times[k]) - legit
	}
	if r.NoTierKeys > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d keys (%d requests) match no tier of the policy and it has no default tier: they are not replayed", r.NoTierKeys, r.NoTierRequests))
	}
	if r.NoTierKeys == r.Keys {
		return nil, fmt.Errorf("calibrate: none of the %d keys matches a tier of policy %s (key prefixes %s, no default tier)", r.Keys, o.Policy.Source, prefixes(o.Policy))
	}
	for i := range o.Policy.Tiers {
		tier := &o.Policy.Tiers[i]
		if len(groups[i].keys) == 0 {
			continue
		}
		for _, l := range tier.Limits {
			if l.AnchoredAtFirst() || l.CountsRejected() || l.PerInstance() {
				r.Notes = append(r.Notes, fmt.Sprintf("tier %s, limit %s: anchor %q, counts %q, scope %q are replayed as the reference limiters decide (epoch-anchored windows, refused requests use up nothing, one quota for the key)", tier.Name, l.Name, l.Anchor, l.Counts, l.Scope))
			}
		}
		tr, err := t.calibrateTier(tier, &groups[i], &o, time.Duration(last-first))
		if err != nil {
			return nil, fmt.Errorf("calibrate: tier %s: %w", tier.Name, err)
		}
		r.Tiers = append(r.Tiers, *tr)
	}
	return r, nil
}

func prefixes(p *policy.Policy) string {
	var s []string
	for _, t := range p.Tiers {
		s = append(s, fmt.Sprintf("%q", t.KeyPrefix))
	}
	return fmt.Sprint(s)
}

func (g *group) outcome(x tally) Outcome {
	o := Outcome{Legit: x.legitRefused, Abusive: x.abusiveRefused}
	if g.legitTotal > 0 {
		o.LegitShare = float64(x.legitRefused) / float64(g.legitTotal)
	}
	if g.abTotal > 0 {
		o.AbusiveShare = float64(x.abusiveRefused) / float64(g.abTotal)
	}
	return o
}

// normalized returns l with both views filled, as the policy loader does.
func normalized(l policy.Limit) (policy.Limit, error) {
	p := &policy.Policy{Tiers: []policy.Tier{{Name: "x", Limits: []policy.Limit{l}}}}
	if err := p.Validate(); err != nil {
		return policy.Limit{}, err
	}
	return p.Tiers[0].Limits[0], nil
}

// withCount returns l (of family alg) with capacity or count n, keeping
// its rate (bucket families) or window (window families).
func withCount(l policy.Limit, n int64) (policy.Limit, error) {
	x := policy.Limit{Name: l.Name, Algorithm: l.Algorithm, ErrorBound: l.ErrorBound}
	if l.Algorithm.Bucketed() {
		x.Capacity, x.Rate = n, l.Rate
	} else {
		x.Count, x.Window = n, l.Window
	}
	return normalized(x)
}

// inFamily returns l as a limit of family a with the same numbers.
func inFamily(l policy.Limit, a policy.Algorithm) policy.Limit {
	l.Algorithm = a
	l.Anchor, l.Counts, l.Scope = "", "", ""
	if a == policy.SlidingCounter && l.ErrorBound == 0 {
		l.ErrorBound = 1
	}
	if a != policy.SlidingCounter {
		l.ErrorBound = 0
	}
	return l
}

func (t *Traffic) calibrateTier(tier *policy.Tier, g *group, o *Options, span time.Duration) (*TierReport, error) {
	tr := &TierReport{Tier: tier.Name, Keys: len(g.keys), Legit: g.legitTotal, Abusive: g.abTotal, Declared: tier.Limits}
	for _, k := range g.keys {
		tr.Requests += len(t.times[k])
	}
	alg := tier.Limits[0].Algorithm
	for _, l := range tier.Limits[1:] {
		if l.Algorithm != alg {
			return nil, fmt.Errorf("its limits are of families %s and %s: the reference limiters run one family per key", alg, l.Algorithm)
		}
	}
	// The declared limits, every decision kept for the comparison, the
	// worst keys and minutes, and the timeline.
	decided := make([][]bool, len(g.keys))
	for i, k := range g.keys {
		decided[i] = allTrue(len(t.times[k]))
	}
	x, err := t.replay(g, alg, tier.Limits, t.canRefuse(g, tier.Limits), func(i, j int, ok bool) { decided[i][j] = ok })
	if err != nil {
		return nil, err
	}
	tr.Refused = g.outcome(x)
	t.worst(tr, g, decided)

	// Comparisons: each family at the first limit's numbers, then Compare.
	type cmp struct {
		name   string
		limits []policy.Limit
	}
	var cmps []cmp
	for _, a := range policy.Algorithms {
		l := tier.Limits[0]
		if a != l.Algorithm {
			l = inFamily(l, a)
		}
		cmps = append(cmps, cmp{string(a), []policy.Limit{l}})
	}
	for _, l := range o.Compare {
		n, _ := normalized(l)
		cmps = append(cmps, cmp{n.Describe(), []policy.Limit{n}})
	}
	var tlCols [][]bool
	tlIndex := t.timelineKey(tr, g, o)
	other := make([][]bool, len(g.keys))
	for i := range other {
		other[i] = allTrue(len(decided[i]))
	}
	for _, c := range cmps {
		if len(tier.Limits) == 1 && c.limits[0] == tier.Limits[0] {
			// The declared limit itself: its replay is done.
			tr.Compare = append(tr.Compare, Comparison{Name: c.name, Limit: c.limits[0], Refused: tr.Refused})
			if tlIndex >= 0 {
				tlCols = append(tlCols, slices.Clone(decided[tlIndex]))
			}
			continue
		}
		for i := range other {
			fill(other[i], true)
		}
		x, err := t.replay(g, c.limits[0].Algorithm, c.limits, t.canRefuse(g, c.limits), func(i, j int, ok bool) { other[i][j] = ok })
		if err != nil {
			return nil, fmt.Errorf("comparing %s: %w", c.name, err)
		}
		dis := 0
		for i := range other {
			for j, ok := range other[i] {
				if ok != decided[i][j] {
					dis++
				}
			}
		}
		tr.Compare = append(tr.Compare, Comparison{Name: c.name, Limit: c.limits[0], Refused: g.outcome(x), Disagree: dis})
		if tlIndex >= 0 {
			tlCols = append(tlCols, slices.Clone(other[tlIndex]))
		}
	}
	if tlIndex >= 0 {
		tr.Timeline = t.timeline(g, tlIndex, o.TimelineMax, decided[tlIndex], tr.Compare, tlCols)
	}

	s := searcher{t: t, g: g, o: o, span: span}
	for _, l := range tier.Limits {
		for _, a := range familiesOf(l.Algorithm) {
			base := inFamily(l, a)
			if a == l.Algorithm {
				base = l
			}
			rec, err := s.count(base)
			if err != nil {
				return nil, err
			}
			tr.Recommended = append(tr.Recommended, rec)
			rec, err = s.rate(base)
			if err != nil {
				return nil, err
			}
			tr.Recommended = append(tr.Recommended, rec)
		}
		if o.Curves {
			for _, a := range policy.Algorithms {
				c, err := s.countCurve(inFamily(l, a))
				if err != nil {
					return nil, err
				}
				tr.Curves = append(tr.Curves, c)
			}
			c, err := s.rateCurve(l)
			if err != nil {
				return nil, err
			}
			tr.Curves = append(tr.Curves, c)
		}
	}
	return tr, nil
}

// familiesOf lists the declared family first, then the others (at the
// same numbers: K, r ≡ N, W).
func familiesOf(a policy.Algorithm) []policy.Algorithm {
	out := []policy.Algorithm{a}
	for _, b := range policy.Algorithms {
		if b != a {
			out = append(out, b)
		}
	}
	return out
}

// worst fills the top keys and the worst minutes from the declared
// decisions.
func (t *Traffic) worst(tr *TierReport, g *group, decided [][]bool) {
	type km struct {
		minute int64
		key    int
	}
	perMinute := map[int64]int{}
	perKeyMinute := map[km]int{}
	for i, k := range g.keys {
		refused := 0
		for j, ok := range decided[i] {
			if ok || g.abusive[i] != nil && g.abusive[i][j] {
				continue
			}
			refused++
			m := floorDiv(t.times[k][j], int64(time.Minute))
			perMinute[m]++
			perKeyMinute[km{m, i}]++
		}
		if refused > 0 {
			tr.TopKeys = append(tr.TopKeys, KeyRefusal{Key: t.keys[k], Requests: g.legit[i], Refused: refused, Share: float64(refused) / float64(max(1, g.legit[i]))})
		}
	}
	sort.Slice(tr.TopKeys, func(a, b int) bool {
		x, y := tr.TopKeys[a], tr.TopKeys[b]
		return x.Refused > y.Refused || x.Refused == y.Refused && x.Key < y.Key
	})
	if len(tr.TopKeys) > 10 {
		tr.TopKeys = tr.TopKeys[:10]
	}
	var minutes []int64
	for m := range perMinute {
		minutes = append(minutes, m)
	}
	sort.Slice(minutes, func(a, b int) bool {
		x, y := perMinute[minutes[a]], perMinute[minutes[b]]
		return x > y || x == y && minutes[a] < minutes[b]
	})
	if len(minutes) > 5 {
		minutes = minutes[:5]
	}
	for _, m := range minutes {
		best, bestN := -1, 0
		for i := range g.keys {
			if n := perKeyMinute[km{m, i}]; n > bestN || n == bestN && n > 0 && t.keys[g.keys[i]] < t.keys[g.keys[best]] {
				best, bestN = i, n
			}
		}
		ts := t.times[g.keys[best]]
		from, to := m*int64(time.Minute), (m+1)*int64(time.Minute)
		lo := sort.Search(len(ts), func(j int) bool { return ts[j] >= from })
		hi := sort.Search(len(ts), func(j int) bool { return ts[j] >= to })
		peak, peakAt, head := 0, int64(0), lo
		for j := lo; j < hi; j++ {
			for ts[head] <= ts[j]-int64(time.Second) {
				head++
			}
			if n := j - head + 1; n > peak {
				peak, peakAt = n, ts[head]
			}
		}
		tr.WorstMinutes = append(tr.WorstMinutes, Minute{
			Start: time.Unix(0, from).UTC(), Refused: perMinute[m], Key: t.keys[g.keys[best]], KeyRefused: bestN,
			KeyRequests: hi - lo, PeakSecond: peak, PeakAt: time.Unix(0, peakAt).UTC(),
		})
	}
}

// timelineKey returns the index in g of the timeline's key, -1 for none.
func (t *Traffic) timelineKey(tr *TierReport, g *group, o *Options) int {
	want := o.TimelineKey
	if want == "" {
		if len(tr.TopKeys) == 0 {
			return -1
		}
		want = tr.TopKeys[0].Key
	}
	for i, k := range g.keys {
		if t.keys[k] == want {
			return i
		}
	}
	return -1
}

func (t *Traffic) timeline(g *group, i, maxRows int, declared []bool, cmps []Comparison, cols [][]bool) *Timeline {
	ts := t.times[g.keys[i]]
	// Start a few arrivals before the first refusal.
	from := 0
	if first := slices.Index(declared, false); first > 5 && len(ts) > maxRows {
		from = first - 5
	}
	to := min(len(ts), from+maxRows)
	tl := &Timeline{Key: t.keys[g.keys[i]], Start: time.Unix(0, ts[0]).UTC(), Columns: []string{"declared"}, Skipped: from, More: len(ts) - to}
	for _, c := range cmps {
		tl.Columns = append(tl.Columns, c.Name)
	}
	for j := from; j < to; j++ {
		row := TimelineRow{At: float64(ts[j]-ts[0]) / 1e9, Allowed: []bool{declared[j]}}
		if g.abusive[i] != nil {
			row.Abusive = g.abusive[i][j]
		}
		for _, c := range cols {
			row.Allowed = append(row.Allowed, c[j])
		}
		tl.Rows = append(tl.Rows, row)
	}
	return tl
}

// canRefuse returns which keys of g limits can refuse anything: a key
// whose admit-all threshold is within every limit is admitted whole, so
// a replay may skip it (its decisions are all "admitted").
func (t *Traffic) canRefuse(g *group, limits []policy.Limit) func(i int) bool {
	need := make([]bool, len(g.keys))
	for i, k := range g.keys {
		for _, l := range limits {
			if admitAll(l, t.times[k]) > l.Count {
				need[i] = true
				break
			}
		}
	}
	return func(i int) bool { return need[i] }
}

func allTrue(n int) []bool {
	b := make([]bool, n)
	fill(b, true)
	return b
}

func fill(b []bool, v bool) {
	for i := range b {
		b[i] = v
	}
}
