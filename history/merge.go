package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// MaxShardSpread bounds how far apart the run starts of the shards of one
// run may be. `attack --shard i/n` on several machines starts them at
// about the same instant; histories further apart are not one run.
const MaxShardSpread = time.Hour

// Merge combines shard histories into one: offsets are rebased to the
// earliest run start, events sorted by send time. The first header is kept,
// with the shards' instances and notes appended.
//
// The shards must be of one run: the same run id, plan, policy (name and
// declared content) and seed, distinct shard numbers of one split, run
// starts within MaxShardSpread of each other, and no event id in two of
// them. Anything else is an error naming the shards and what differs.
func Merge(hs ...*History) (*History, error) {
	if len(hs) == 0 {
		return nil, errors.New("history: nothing to merge")
	}
	if len(hs) == 1 {
		hs[0].MissingShards = missingShards(hs)
		return hs[0], nil
	}
	if err := checkShards(hs); err != nil {
		return nil, err
	}
	base := hs[0].Run.Start
	for _, h := range hs[1:] {
		if h.Run.Start.Before(base) {
			base = h.Run.Start
		}
	}
	out := &History{Run: hs[0].Run}
	out.Run.Start = base
	out.Run.Shard = ""
	var end End
	for i, h := range hs {
		shift := h.Run.Start.Sub(base).Nanoseconds()
		for _, e := range h.Events {
			e.Intended += shift
			e.Sent += shift
			e.Recv += shift
			out.Events = append(out.Events, e)
		}
		// Offsets that are 0 when not recorded stay 0.
		shiftSet := func(offs ...*int64) {
			for _, o := range offs {
				if *o != 0 {
					*o += shift
				}
			}
		}
		for _, f := range h.Faults {
			f.Start += shift
			shiftSet(&f.End, &f.Injecting, &f.Cleared)
			out.Faults = append(out.Faults, f)
		}
		for _, sk := range h.Sink {
			shiftSet(&sk.First, &sk.Last, &sk.At)
			out.Sink = append(out.Sink, sk)
		}
		for _, p := range h.Phases {
			p.Start += shift
			p.End += shift
			shiftSet(&p.Target)
			out.Phases = append(out.Phases, p)
		}
		for _, x := range h.Samples {
			x.At += shift
			out.Samples = append(out.Samples, x)
		}
		if i > 0 {
			out.Run.Instances = append(out.Run.Instances, h.Run.Instances...)
			out.Run.Notes = append(out.Run.Notes, h.Run.Notes...)
		}
		if h.End == nil {
			end.Interrupted = true
			end.Reason = "a shard has no end record"
		} else {
			end.Requests += h.End.Requests
			end.Late += h.End.Late
			end.Dropped += h.End.Dropped
			end.Interrupted = end.Interrupted || h.End.Interrupted
			if e := h.End.Elapsed + shift; e > end.Elapsed {
				end.Elapsed = e
			}
		}
		out.Truncated = out.Truncated || h.Truncated
		out.ModifiedShards = append(out.ModifiedShards, h.ModifiedShards...)
		if integrityRank(h.Integrity) > integrityRank(out.Integrity) {
			out.Integrity = h.Integrity
		}
	}
	out.MissingShards = missingShards(hs)
	if dups := duplicateIDs(out.Events); len(dups) > 0 {
		return nil, sharedIDError(hs, dups[0])
	}
	sort.SliceStable(out.Events, func(a, b int) bool { return out.Events[a].Sent < out.Events[b].Sent })
	out.End = &end
	return out, nil
}

// shardName names the i-th of the merged histories in messages.
func shardName(hs []*History, i int) string {
	if hs[i].Source != "" {
		return hs[i].Source
	}
	return fmt.Sprintf("shard %d", i+1)
}

// checkShards reports headers that cannot be of one run.
func checkShards(hs []*History) error {
	a := hs[0].Run
	shards := map[string]int{}
	for i, h := range hs {
		if err := checkStart(h.Run.Start); err != nil {
			return fmt.Errorf("history: %s: %w", shardName(hs, i), err)
		}
		b := h.Run
		if b.Shard != "" {
			if j, twice := shards[b.Shard]; twice {
				return fmt.Errorf("history: %s and %s are both shard %s of the run: give each shard once", shardName(hs, j), shardName(hs, i), b.Shard)
			}
			shards[b.Shard] = i
		}
		if i == 0 {
			continue
		}
		var diff []string
		differ := func(field, x, y string) {
			if x != y {
				diff = append(diff, fmt.Sprintf("%s %q ≠ %q", field, y, x))
			}
		}
		differ("run id", a.ID, b.ID)
		differ("plan", a.Plan, b.Plan)
		differ("policy", a.Policy, b.Policy)
		if !sameJSON(a.Declared, b.Declared) {
			diff = append(diff, "the declared policies differ")
		}
		if a.Seed != b.Seed {
			diff = append(diff, fmt.Sprintf("seed %d ≠ %d", b.Seed, a.Seed))
		}
		if na, nb := splitOf(a.Shard), splitOf(b.Shard); na != nb {
			diff = append(diff, fmt.Sprintf("shard %q ≠ %q", b.Shard, a.Shard))
		}
		if len(diff) > 0 {
			return fmt.Errorf("history: %s and %s are not shards of one run: %s", shardName(hs, i), shardName(hs, 0), strings.Join(diff, ", "))
		}
	}
	first, last := 0, 0
	for i, h := range hs {
		if h.Run.Start.Before(hs[first].Run.Start) {
			first = i
		}
		if h.Run.Start.After(hs[last].Run.Start) {
			last = i
		}
	}
	if d := hs[last].Run.Start.Sub(hs[first].Run.Start); d > MaxShardSpread {
		return fmt.Errorf("history: %s starts at %s and %s at %s, %s apart: the shards of one run start within %s of each other",
			shardName(hs, first), hs[first].Run.Start.Format(time.RFC3339), shardName(hs, last), hs[last].Run.Start.Format(time.RFC3339), d, MaxShardSpread)
	}
	return nil
}

// splitOf is the n of a shard "i/n" ("" when not a shard).
func splitOf(shard string) string {
	_, n, _ := strings.Cut(shard, "/")
	return n
}

func sameJSON(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return false
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// sharedIDError names two of the shards holding event id.
func sharedIDError(hs []*History, id uint64) error {
	var in []string
	for i, h := range hs {
		for j := range h.Events {
			if h.Events[j].ID == id {
				in = append(in, shardName(hs, i))
				break
			}
		}
	}
	if len(in) < 2 { // twice in one shard built in memory
		return fmt.Errorf("history: %s: %s", strings.Join(in, ""), describeDuplicates([]uint64{id}))
	}
	return fmt.Errorf("history: event id %d appears in %s and %s: were they produced by one split into shards (Shard, Shards) of the same plan?", id, in[0], in[1])
}

// duplicateIDs returns, sorted, the event ids that appear more than once.
func duplicateIDs(events []Event) []uint64 {
	if len(events) < 2 {
		return nil
	}
	lo, hi := events[0].ID, events[0].ID
	for i := range events {
		lo, hi = min(lo, events[i].ID), max(hi, events[i].ID)
	}
	var dups []uint64
	if span := hi - lo; span/8 < uint64(len(events)) {
		// Dense ids (the engine numbers from 1): one bit per id.
		seen := make([]uint64, span/64+1)
		for i := range events {
			d := events[i].ID - lo
			if seen[d/64]&(1<<(d%64)) != 0 {
				dups = append(dups, events[i].ID)
			}
			seen[d/64] |= 1 << (d % 64)
		}
	} else {
		ids := make([]uint64, len(events))
		for i := range events {
			ids[i] = events[i].ID
		}
		slices.Sort(ids)
		for i := 1; i < len(ids); i++ {
			if ids[i] == ids[i-1] {
				dups = append(dups, ids[i])
			}
		}
	}
	slices.Sort(dups)
	return slices.Compact(dups)
}

// describeDuplicates says which ids appear more than once.
func describeDuplicates(dups []uint64) string {
	return describeDuplicatesN(dups[:min(len(dups), shownDuplicates)], len(dups))
}

// shownDuplicates is how many duplicate ids a message names.
const shownDuplicates = 5

// describeDuplicatesN is describeDuplicates of total duplicates, the
// first of which are first (at most shownDuplicates).
func describeDuplicatesN(first []uint64, total int) string {
	var b strings.Builder
	if total == 1 {
		fmt.Fprintf(&b, "event id %d appears more than once", first[0])
	} else {
		b.WriteString("event ids ")
		for i, id := range first {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprint(&b, id)
		}
		if total > len(first) {
			fmt.Fprintf(&b, " (and %d more)", total-len(first))
		}
		b.WriteString(" appear more than once")
	}
	b.WriteString(": every request needs its own id")
	return b.String()
}

// integrityRank orders Integrity from the weakest claim down: a merge is
// as trustworthy as its least trustworthy shard.
func integrityRank(i Integrity) int {
	switch i {
	case Modified:
		return 4
	case NoEnd:
		return 3
	case NoDigest:
		return 2
	case Intact:
		return 1
	}
	return 0
}

// missingShards names the shards of the split ("i/n") that hs do not
// hold; nil when the run was not split or every shard is there.
func missingShards(hs []*History) []string {
	n, err := strconv.Atoi(splitOf(hs[0].Run.Shard))
	if err != nil || n < 2 || n > 1<<16 {
		return nil
	}
	have := map[string]bool{}
	for _, h := range hs {
		have[h.Run.Shard] = true
	}
	var out []string
	for i := 1; i <= n; i++ {
		if s := fmt.Sprintf("%d/%d", i, n); !have[s] {
			out = append(out, s)
		}
	}
	return out
}
