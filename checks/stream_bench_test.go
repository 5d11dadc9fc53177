package checks

import (
	"testing"

	"github.com/rlverify/rlverify/history"
)

// BenchmarkStreamerEach is the streaming judgement's cost per event of
// each check that streams, alone (the events handed from memory in send
// order: the stream's decoding is not measured), on the bench history of
// 10^6 events of 10^4 keys: a correct bucket without faults, phases or
// variants (the common soak). "none" is the Streamer with no check's
// work but the shared per-key state; "all" every check that streams.
func BenchmarkStreamerEach(b *testing.B) {
	h := benchHistory(1_000_000, 10_000)
	p := benchPolicy()
	rec := &history.History{Run: h.Run}
	for _, name := range append(append([]string{"none"}, StreamableUnder(p)...), "oversell+bypass", "all") {
		b.Run(name, func(b *testing.B) {
			only := []string{name}
			switch name {
			case "none":
				only = []string{DelayCheck} // a SKIP from the policy alone
			case "oversell+bypass":
				only = []string{"oversell", "bypass"} // bypass shares oversell's stream
			case "all":
				only = StreamableUnder(p)
			}
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				s, err := NewStreamer(rec, p, Options{Only: only})
				if err != nil {
					b.Fatal(err)
				}
				s.SetEvents(int64(len(h.Events)))
				for j := range h.Events {
					s.Add(&h.Events[j], uint64(j))
				}
				if s.Again() {
					for j := range h.Events {
						s.AddAgain(&h.Events[j], uint64(j))
					}
				}
				s.Results()
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/float64(len(h.Events)), "cpu-ns/event")
		})
	}
}
