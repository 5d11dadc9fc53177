package attacks

import (
	"context"
	"fmt"
	"time"
)

// MaxStartWait is the longest a run waits for its start instant
// (Options.StartAt): far enough ahead for every shard of a cluster job to be
// scheduled, near enough that a typo in the date is an error, not a hang.
const MaxStartWait = time.Hour

// CheckStart says whether a run may wait from now until at: not in the
// past, and at most MaxStartWait ahead.
func CheckStart(at, now time.Time) error {
	d := at.Sub(now)
	switch {
	case d < 0:
		return fmt.Errorf("start instant %s is %s in the past: shards would not start together; give an instant ahead of every shard's start (e.g. two minutes ahead)",
			at.UTC().Format(time.RFC3339Nano), (-d).Round(time.Millisecond))
	case d > MaxStartWait:
		return fmt.Errorf("start instant %s is %s ahead, more than the %s a run waits: is the date right?",
			at.UTC().Format(time.RFC3339Nano), d.Round(time.Second), MaxStartWait)
	}
	return nil
}

// waitForStart waits until Options.StartAt (when set), on the engine's
// clock. An instant that passed before the run could begin (the
// environment took long to start) is a PrepareError: nothing was sent. A
// cancelled ctx ends the wait early; the run then records its interruption.
func (e *Engine) waitForStart(ctx context.Context) error {
	if e.o.StartAt.IsZero() {
		return nil
	}
	now := e.o.Now()
	if err := CheckStart(e.o.StartAt, now); err != nil {
		return &PrepareError{fmt.Errorf("attacks: %w", err)}
	}
	e.o.Sleep(ctx, e.o.StartAt.Sub(now))
	return nil
}
