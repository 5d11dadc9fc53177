package attacks

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzParsePlan feeds arbitrary bytes to Parse. It must never panic, every
// error names the file, and an accepted plan validates again unchanged.
func FuzzParsePlan(f *testing.F) {
	for _, p := range Builtins() {
		data, _ := BuiltinYAML(strings.TrimPrefix(p.Source, "builtin:"))
		f.Add(data)
	}
	f.Add([]byte("name: x\nphases:\n  - kind: rate\n    key: free-a\n    rate: 1e308/1ns\n    duration: 1s\n"))
	f.Add([]byte("name: x\nphases:\n  - kind: burst\n    key: free-a\n    requests: 1000000000\n"))
	f.Add([]byte("name: x\nneeds: [faults, redis, instances>=2]\nphases:\n  - {kind: fault, action: inject, fault: clock-skew, param: \"+2s\", instance: 1}\n"))
	f.Add([]byte("a: &a [x, x]\nb: &b [*a, *a]\nname: *b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Go's fuzzer does not notice a hang; make one a crash it reports.
		watchdog := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("Parse hangs on %q", data)) })
		defer watchdog.Stop()
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		c := *p
		c.Phases = append([]Phase(nil), p.Phases...)
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted plan does not validate again: %v\n%s", err, data)
		}
		if !reflect.DeepEqual(p, &c) {
			t.Fatalf("validating again changed the plan:\n%+v\n%+v", p, &c)
		}
	})
}
