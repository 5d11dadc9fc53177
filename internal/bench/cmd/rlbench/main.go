// Command rlbench runs rlverify's side-by-side benchmarks and prints one
// Markdown table of measured values, ratios and targets (DESIGN.md,
// "Performance targets"). scripts/bench.sh builds the tools it compares
// against and runs it; see BENCHMARKS.md.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/rlverify/rlverify/internal/bench"
)

type config struct {
	rounds         int
	dur            time.Duration
	wrk, vegeta    string
	rlverify       string
	redisAddr      string
	redisBenchmark string
	tmp            string
	only           map[string]bool
	url            string
	// streamMax is the largest power of ten of events the stream rows judge.
	streamMax int
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "scale" {
		if err := scaleChild(os.Args[2:]); err != nil {
			fatal(err)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "stream" {
		if err := streamFile(os.Args[2:]); err != nil {
			fatal(err)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "gen" {
		if err := genFile(os.Args[2:]); err != nil {
			fatal(err)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(ln.Addr().String())
		fmt.Fprintln(os.Stderr, bench.Serve(ln))
		os.Exit(1)
	}
	var c config
	var only string
	flag.IntVar(&c.rounds, "rounds", 3, "rounds of each side-by-side measurement (medians are reported)")
	flag.DurationVar(&c.dur, "dur", 4*time.Second, "length of each load measurement")
	flag.StringVar(&c.wrk, "wrk", "wrk", "wrk binary")
	flag.StringVar(&c.vegeta, "vegeta", "", "vegeta CLI binary (skipped when empty)")
	flag.StringVar(&c.rlverify, "rlverify", "", "rlverify binary for the end-to-end check (skipped when empty)")
	flag.StringVar(&c.redisAddr, "redis", "", "redis-server address for the Redis rows (skipped when empty)")
	flag.StringVar(&c.redisBenchmark, "redis-benchmark", "redis-benchmark", "redis-benchmark binary")
	flag.StringVar(&c.tmp, "tmp", os.TempDir(), "directory for history files")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run here")
	flag.IntVar(&c.streamMax, "stream-max", 7, "the stream rows judge 10^6 … 10^N events (8: a 20 GB file)")
	flag.StringVar(&only, "only", "load,burst,checks,limiters,redis,scaling,stream,import,audit,calibrate", "sections to run")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	c.only = map[string]bool{}
	for _, s := range strings.Split(only, ",") {
		c.only[strings.TrimSpace(s)] = true
	}
	var t bench.Table
	ctx := context.Background()
	fmt.Fprintf(os.Stderr, "rlbench: %d CPUs, %s, %d rounds of %s\n", runtime.NumCPU(), runtime.Version(), c.rounds, c.dur)
	if c.only["load"] || c.only["burst"] {
		stop, err := c.startServer()
		if err != nil {
			fatal(err)
		}
		defer stop()
	}
	steps := []struct {
		name string
		run  func(context.Context, *bench.Table) error
	}{
		{"load", c.load},
		{"burst", c.burst},
		{"checks", c.checks},
		{"limiters", c.limiters},
		{"redis", c.redis},
		{"scaling", c.scaling},
		{"stream", c.streamRows},
		{"import", c.importRows},
		{"audit", c.auditRow},
		{"calibrate", c.calibrateRow},
	}
	for _, s := range steps {
		if !c.only[s.name] {
			continue
		}
		fmt.Fprintf(os.Stderr, "rlbench: %s …\n", s.name)
		if err := s.run(ctx, &t); err != nil {
			t.Add(s.name, "error", strings.ReplaceAll(err.Error(), "|", "/"), "", "ERROR")
		}
	}
	t.Write(os.Stdout)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "rlbench:", err)
	os.Exit(1)
}

// startServer runs the trivial server in a child process (the same one for
// every load tool) and sets c.url.
func (c *config) startServer() (func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "serve")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("trivial server: %w", err)
	}
	c.url = "http://" + strings.TrimSpace(line)
	return func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }, nil
}

func (c *config) tmpFile(name string) string { return filepath.Join(c.tmp, name) }

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
