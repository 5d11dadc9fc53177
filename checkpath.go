package rlverify

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/rlverify/rlverify/checks"
	"github.com/rlverify/rlverify/history"
	"github.com/rlverify/rlverify/importers"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/reports"
)

// Path is how Check judges a history (docs/streaming.md).
type Path string

const (
	// InMemory reads the whole history into memory (about 0.5–0.75 KB an
	// event at peak) and judges it there: every check, thresholds, shards.
	InMemory Path = "in-memory"
	// Streaming reads the history file as a stream, two or three times,
	// and keeps state bounded by the policy and the keys, not by the run's
	// length: the same document as InMemory, for the checks that stream.
	Streaming Path = "streaming"
)

// ChoosePath says which path Check takes for o, and why. Check streams
// when o names one history file (not standard input, which cannot be read
// twice; not several shards, which are merged in memory; not a history
// already in memory), asks for no thresholds (they read the events in
// memory), does not set InMemory, the history is neither an import nor
// one shard of a run nor a run whose faults the streaming checks do not
// judge yet (checks.StreamRecords: limit changes, clock steps), and every
// check Check would judge — Checks.Only, or all, less those turned off by
// the policy's checks_off and Checks.Off — streams (checks.StreamChecks).
// Otherwise it judges in memory. The history's records are read (not its
// events) when the policy is the history's or the other conditions hold.
// A history that cannot be read, or names no policy, is left to the
// in-memory path, which reports it.
func ChoosePath(o CheckOptions) (Path, string) {
	p, why, _, _ := choosePath(o)
	return p, why
}

// choosePath is ChoosePath, with the records read and the policy to judge
// by (nil unless Streaming) and the checks to stream.
func choosePath(o CheckOptions) (path Path, why string, rec *records, names []string) {
	switch {
	case o.InMemory:
		return InMemory, "asked for (CheckOptions.InMemory)", nil, nil
	case o.History != nil:
		return InMemory, "the history is already in memory", nil, nil
	case len(o.Histories) != 1:
		return InMemory, fmt.Sprintf("%d shards are merged in memory", len(o.Histories)), nil, nil
	case o.Histories[0] == Stdin:
		return InMemory, "standard input cannot be read twice", nil, nil
	case len(o.Thresholds) > 0:
		return InMemory, "thresholds read the events in memory", nil, nil
	}
	file := o.Histories[0]
	// Rule out the checks on the policy before reading the events' lines:
	// the policy given, else the one the run header (the first line)
	// declares. The header read alone may fail where the whole read would
	// say better why: then the records decide.
	pre := o.Policy
	if pre == nil {
		pre, _ = headerPolicy(file)
	}
	if pre != nil {
		if _, ok, why := checks.StreamChecks(pre, o.Checks); !ok {
			return InMemory, why, nil, nil
		}
	}
	// A file that cannot be read, or that names no policy, is left to the
	// in-memory path, which says why as it always has.
	f, err := os.Open(file)
	if err != nil {
		return InMemory, fmt.Sprintf("the history cannot be opened: %v", err), nil, nil
	}
	defer f.Close()
	// The records decide the path; the stream's own read checks the
	// digest (its History is the document's).
	h, n, err := history.ScanRecords(file, f)
	if err != nil {
		return InMemory, fmt.Sprintf("the history's records cannot be read: %v", err), nil, nil
	}
	if name, ok := importers.Format(h.Run); ok {
		return InMemory, fmt.Sprintf("a history imported from %s is completed in memory", name), nil, nil
	}
	if ok, why := checks.StreamRecords(h); !ok {
		return InMemory, why, nil, nil
	}
	if h.Run.Shard != "" {
		return InMemory, fmt.Sprintf("the history is shard %s of a run", h.Run.Shard), nil, nil
	}
	pol := o.Policy
	if pol == nil {
		if pol, err = HistoryPolicy(h); err != nil {
			return InMemory, fmt.Sprintf("no policy to judge by: %v", err), nil, nil
		}
	}
	names, ok, why := checks.StreamChecks(judgeable(h, pol), o.Checks)
	if !ok {
		return InMemory, why, nil, nil
	}
	return Streaming, "every check judged streams: " + strings.Join(names, ", "), &records{h, n}, names
}

// records are a history's records (history.ScanRecords) and the number
// of its event lines the scan counted (checks.Streamer.SetEvents).
type records struct {
	*history.History
	events int64
}

// errReorder is how judgeStream gives up on a file too far out of send
// order for the stream: Check then judges it in memory.
var errReorder = errors.New("out of order")

// errInMemory is how judgeStream gives up on a history one of whose
// checks found, in the first pass, that only the in-memory path judges it
// (checks.Streamer.InMemory): Check then judges it in memory.
var errInMemory = errors.New("needs the in-memory path")

// fallsBack says whether judgeStream's err sends the history to the
// in-memory path.
func fallsBack(err error) bool { return errors.Is(err, errReorder) || errors.Is(err, errInMemory) }

// judgeStream is judge on the streaming path: rec are the history's
// records, names the checks to stream, so how to read the file; also, if
// any, see every event of the first pass too (the attack's reachability
// tally).
func judgeStream(o CheckOptions, recs *records, names []string, so history.StreamOptions, also ...func(*history.Event, uint64)) (*Outcome, error) {
	file := o.Histories[0]
	rec := recs.History
	pol := o.Policy
	if pol == nil {
		var err error
		if pol, err = HistoryPolicy(rec); err != nil {
			return nil, err
		}
	}
	pol = judgeable(rec, pol)
	defer streamGC()()
	co := o.Checks
	co.Only = names
	s, err := checks.NewStreamer(rec, pol, co)
	if err != nil {
		return nil, optionWrap(err)
	}
	s.SetEvents(recs.events)
	doc := reports.NewDocStream(rec, pol)
	// The second pass reads the first pass's events from a spill file
	// rather than decode the history again: whole events when the checks
	// are likely to ask for them, else the few fields of each that the
	// document's second pass reads.
	// The document's first pass runs beside the checks', on the spill's
	// writer (which has its copy of each event), and so does its second
	// pass where the spill keeps whole events (on the spill's reader).
	var sp *spill
	if s.MayAgain() {
		sp = newEventSpill("", doc.Add)
	} else {
		sp = newSpill("", doc)
	}
	defer sp.close()
	h, err := streamPass(file, so, append([]func(*history.Event, uint64){s.Add, sp.add}, also...)...)
	if err != nil {
		return nil, err
	}
	sp.join() // the document has had every event
	if why, ok := s.InMemory(); ok {
		return nil, fmt.Errorf("%w: %s", errInMemory, why)
	}
	again := s.Again()
	if doc.Again() || again {
		// The first pass's buffers (its held events, its windows) are
		// garbage now: collect them before the second pass allocates its
		// own, rather than let the heap grow to hold both.
		runtime.GC()
		// The history is read again when the spill could not be written,
		// or it keeps compact records and the checks ask for the events or
		// the document draws its requests one by one; a spill that fails
		// while it is read back has been partly added, so that is the
		// check's error.
		again2 := []func(*history.Event, uint64){s.AddAgain, doc.AddAgain}
		switch {
		case sp.failed() || !sp.keepsEvents() && (again || doc.Lanes()):
			if _, err := streamPass(file, so, again2...); err != nil {
				return nil, err
			}
		case sp.keepsEvents():
			if err := sp.replayEvents(doc.AddAgain, s.AddAgain); err != nil {
				return nil, err
			}
		default:
			if err := sp.replay(doc.AddCompact); err != nil {
				return nil, err
			}
		}
	}
	sp.close()
	judgeable(h, pol)
	errs, by := doc.Errors().Result()
	rs := checks.JudgeStreamed(s.Results(), doc.Stats(), errs, by, pol, o.Checks)
	return &Outcome{Document: doc.Document(h, rs), Results: rs, History: h}, nil
}

// judgeStreamLean is judgeStream with the lean stream (one decoder,
// small windows) holding back only the events sent within reorder, how
// far out of send order the file's writer measured it; a file further
// out of order than that (edited since) is judged again with the default
// stream. reached tallies the events of the pass that judged.
func judgeStreamLean(o CheckOptions, rec *records, names []string, reorder time.Duration) (*Outcome, *reachTally, error) {
	reached := newReachTally()
	out, err := judgeStream(o, rec, names, history.LeanStreamOptions(reorder+1), reached.add)
	if errors.Is(err, errReorder) {
		reached = newReachTally()
		out, err = judgeStream(o, rec, names, history.StreamOptions{}, reached.add)
	}
	return out, reached, err
}

// judgeStreamMeasured is judgeStream with the reorder bound the file's
// end record measured, when it has one (history.End.Reorder): the stream
// then holds back only the events sent within it — a few for a run whose
// requests answer quickly — where the default bound holds every event
// sent within 10 s (up to MaxHeld). A file further out of order than its
// record says (edited since) is judged again with the default bound.
func judgeStreamMeasured(o CheckOptions, rec *records, names []string) (*Outcome, error) {
	if e := rec.End; e != nil && e.Reorder != nil && *e.Reorder >= 0 {
		out, err := judgeStream(o, rec, names, history.StreamOptions{ReorderBound: time.Duration(*e.Reorder) + 1})
		if !errors.Is(err, errReorder) {
			return out, err
		}
	}
	return judgeStream(o, rec, names, history.StreamOptions{})
}

// streamPass hands every event of file, in send order, to each of add;
// it returns the history's records.
func streamPass(file string, so history.StreamOptions, add ...func(*history.Event, uint64)) (*history.History, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, optionWrap(fmt.Errorf("history: %w", err))
	}
	defer f.Close()
	st := history.NewStream(file, f, so)
	defer st.Close()
	for st.Next() {
		e, seq := st.Event(), st.Seq()
		for _, a := range add {
			a(e, seq)
		}
	}
	if err := st.Err(); err != nil {
		var re *history.ReorderError
		if errors.As(err, &re) {
			return nil, fmt.Errorf("%w: %w", errReorder, err)
		}
		return nil, optionWrap(err)
	}
	return st.History(), nil
}

// headerPolicy is the policy the history in file declares in its run
// header, its first line.
func headerPolicy(file string) (*policy.Policy, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 1<<16).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	h, err := history.Read(file, bytes.NewReader(line))
	if err != nil {
		return nil, err
	}
	return HistoryPolicy(h)
}

// streamGCPercent is the collector's GOGC while a history is streamed.
// The streaming path's live heap is steady once every key has been seen
// (the held events, the keys' state, a window being decoded: about 280 MB
// for 10^5 keys), and its garbage is little (about 12 B an event, the
// decoder's strings of keys not in its cache); with the default GOGC of
// 100 the heap was let grow to twice the live heap before each collection,
// so the peak depended on where in the run the collections fell: 468 MB
// for 10^7 events and 673 MB for 10^8 of the same 10^5 keys, with the same
// live heap (heap profiles after a collection: 281 MB at 10^7 and 284 MB
// at 3·10^7 events). At 25 the heap grows by a quarter of the live heap
// between collections: a collection every few million events.
const streamGCPercent = 25

// streamGC sets GOGC to streamGCPercent unless the user set GOGC, and
// returns what restores it.
func streamGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(streamGCPercent)
	return func() { debug.SetGCPercent(old) }
}
