package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/envs/redisproc"
	"github.com/rlverify/rlverify/policy"
	"github.com/rlverify/rlverify/service"
)

// processKind is what startProcesses needs to know about one gateway
// program.
type processKind struct {
	// name is the program's name in messages and kept files ("nginx").
	name string
	// file is the configuration's name in its temporary directory.
	file string
	prog string
	// desc describes the running stack for the report.
	desc string
	// render writes the configuration for one instance.
	render func(listen, upstream, dir string) string
	// args is the command line that runs configuration conf in dir.
	args       func(dir, conf string) []string
	deviations []Deviation
}

// startAttempts bounds the retries when a free port was taken between
// choosing it and the child binding it.
const startAttempts = 3

// startProcesses starts n instances of a gateway program, each in its own
// temporary directory with its own configuration, in front of one sink.
// Closing the stack stops every child and removes every directory; a failed
// start leaves nothing behind either.
func startProcesses(ctx context.Context, e Environment, pol *policy.Policy, n int, k processKind) (*envs.Stack, error) {
	st := &envs.Stack{Env: k.name, StoreDesc: k.desc}
	ok := false
	defer func() {
		if !ok {
			_ = st.Close()
		}
	}()
	sink := service.NewSink(nil)
	st.Sink = sink
	sinkURL, stopSink, err := service.ServeLoopback(sinkHandler{sink: sink, id: pol.Identity})
	if err != nil {
		return nil, fmt.Errorf("gateway %s: sink: %w", k.name, err)
	}
	st.OnClose(stopSink)
	upstream := strings.TrimPrefix(sinkURL, "http://")
	var kept []string
	for i := 0; i < n; i++ {
		var last error
		for attempt := 0; attempt < startAttempts; attempt++ {
			dir, err := tempDir(k.name)
			if err != nil {
				return nil, err
			}
			port, err := redisproc.FreePort()
			if err != nil {
				_ = os.RemoveAll(dir)
				return nil, fmt.Errorf("gateway %s: %w", k.name, err)
			}
			listen := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			text := k.render(listen, upstream, dir)
			conf := filepath.Join(dir, k.file)
			if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
				_ = os.RemoveAll(dir)
				return nil, fmt.Errorf("gateway %s: %w", k.name, err)
			}
			c, err := startChild(ctx, fmt.Sprintf("%s instance %d", k.name, i), k.prog, k.args(dir, conf), listen)
			if err != nil {
				_ = os.RemoveAll(dir)
				last = err
				if ctx.Err() != nil {
					return nil, err
				}
				continue
			}
			st.OnClose(func() error {
				err := c.stop()
				return errors.Join(err, os.RemoveAll(dir))
			})
			name := fmt.Sprintf("%s-%d%s", k.name, i, filepath.Ext(k.file))
			if err := e.keep(name, text); err != nil {
				return nil, err
			}
			kept = append(kept, name)
			st.Instances = append(st.Instances, "http://"+listen)
			last = nil
			break
		}
		if last != nil {
			return nil, last
		}
	}
	st.Notes = append(st.Notes, fmt.Sprintf("%s: %d process(es), each with its own state, in front of the sink", k.desc, n))
	if e.KeepConfigs != "" {
		st.Notes = append(st.Notes, fmt.Sprintf("generated configuration: %s (in %s)", strings.Join(kept, ", "), e.KeepConfigs))
	}
	st.Notes = append(st.Notes, deviationNotes(k.name, k.deviations)...)
	ok = true
	return st, nil
}

// deviationNotes turns deviations into report notes.
func deviationNotes(gw string, ds []Deviation) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = fmt.Sprintf("%s does not keep the declared promise «%s»: %s", gw, d.Promise, d.Reality)
	}
	return out
}
