package reports

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const chromiumPath = "/usr/bin/chromium"

// chromium runs headless Chromium on page with args, returning stdout and
// stderr. Every network feature it would use on its own is switched off.
func chromium(t *testing.T, page string, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0",
	}
	cmd := exec.CommandContext(ctx, chromiumPath, append(append(base, args...), "file://"+page)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	err := cmd.Run()
	require.NoError(t, err, "chromium %s: %s", strings.Join(args, " "), stderr.String())
	return stdout.String(), stderr.String()
}

// TestHTMLInChromium renders the fixture's page in headless Chromium: the
// screenshot must show a real page (not blank, not one colour, with the
// plot colours in it), the DOM must hold the SVG plots, and the console
// must stay clean. Skipped when Chromium is absent, except in CI.
func TestHTMLInChromium(t *testing.T) {
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing and CI=true: install the Debian package chromium (apt-get install -y chromium)", chromiumPath)
		}
		t.Skipf("%s not found: apt-get install -y chromium to run this test", chromiumPath)
	}
	if testing.Short() {
		t.Skip("-short: skipping headless Chromium")
	}
	_, _, d := fixture(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var buf bytes.Buffer
	require.NoError(t, HTML{}.Render(&buf, d))
	require.NoError(t, os.WriteFile(page, buf.Bytes(), 0o644))

	shot := filepath.Join(dir, "shot.png")
	_, stderr := chromium(t, page, "--screenshot="+shot, "--window-size=1280,1600")
	requireCleanConsole(t, stderr)
	if out := os.Getenv("RLVERIFY_SCREENSHOT"); out != "" {
		b, _ := os.ReadFile(shot)
		_ = os.WriteFile(out, b, 0o644)
	}
	fh, err := os.Open(shot)
	require.NoError(t, err, "no screenshot written")
	defer fh.Close()
	st, err := fh.Stat()
	require.NoError(t, err)
	require.Greater(t, st.Size(), int64(20_000), "screenshot is suspiciously small")
	img, err := png.Decode(fh)
	require.NoError(t, err)
	require.Equal(t, image.Rect(0, 0, 1280, 1600), img.Bounds())
	colours := map[uint32]int{}
	var green, blue, red bool
	for y := 0; y < 1600; y += 2 {
		for x := 0; x < 1280; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			r, g, b = r>>8, g>>8, b>>8
			colours[r<<16|g<<8|b]++
			green = green || near(r, g, b, 0x1a, 0x7f, 0x37) // admitted line
			blue = blue || near(r, g, b, 0x09, 0x69, 0xda)   // envelope, p50
			red = red || near(r, g, b, 0xcf, 0x22, 0x2e)     // rejected, FAIL badge
		}
	}
	require.Greater(t, len(colours), 50, "the screenshot is nearly one colour")
	top := 0
	for _, n := range colours {
		top = max(top, n)
	}
	require.Less(t, top, 640*800*97/100, "one colour covers almost the whole screenshot")
	require.True(t, green && blue && red, "plot colours missing (green %v blue %v red %v)", green, blue, red)

	dom, stderr := chromium(t, page, "--dump-dom")
	requireCleanConsole(t, stderr)
	require.Contains(t, dom, `<svg class="plot"`)
	require.Contains(t, dom, `<path class="ln adm"`)
	require.Contains(t, dom, `<path class="ln env"`)
	require.Contains(t, dom, `<path class="ln lvl"`)
	require.Contains(t, dom, `<path class="ln p99"`)
	require.Contains(t, dom, `<rect class="viol"`)
	require.Contains(t, dom, `<rect class="fault"`)
}

func near(r, g, b, wr, wg, wb uint32) bool {
	d := func(a, b uint32) uint32 {
		if a > b {
			return a - b
		}
		return b - a
	}
	return d(r, wr) < 12 && d(g, wg) < 12 && d(b, wb) < 12
}

func requireCleanConsole(t *testing.T, stderr string) {
	t.Helper()
	for _, bad := range []string{"Uncaught", "ERROR:CONSOLE", ":CONSOLE", "Refused to", "net::ERR_"} {
		require.NotContains(t, stderr, bad, "chromium logged a page problem:\n%s", stderr)
	}
}
