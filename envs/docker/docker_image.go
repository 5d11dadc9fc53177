package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// EnvBinary names a static rlverify binary the docker environment builds its
// limiter image from when the image is absent.
const EnvBinary = "RLVERIFY_BINARY"

// limiterDockerfile is the limiter image: the static binary alone. No
// "# syntax=" line: the classic builder needs nothing from a registry.
const limiterDockerfile = `FROM scratch
COPY rlverify /rlverify
EXPOSE 8080 9090
ENTRYPOINT ["/rlverify"]
CMD ["serve", "--addr", "0.0.0.0:8080"]
`

// ensureLimiterImage makes sure image exists, building it from a static
// binary when it does not (or when Rebuild is set).
func (d Docker) ensureLimiterImage(ctx context.Context, cli *testcontainers.DockerClient, image string, logf func(string, ...any)) error {
	if !d.Rebuild {
		if _, err := cli.ImageInspect(ctx, image); err == nil {
			return nil
		}
	}
	bin, err := d.staticBinary()
	if err != nil {
		return fmt.Errorf("docker: limiter image %q is not present and cannot be built: %w", image, err)
	}
	logf("docker: building %s from %s", image, bin)
	began := time.Now()
	if err := BuildLimiterImage(ctx, cli.Client, image, bin); err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	logf("docker: built %s in %s", image, time.Since(began).Round(10*time.Millisecond))
	return nil
}

// staticBinary finds the binary to put in the limiter image.
func (d Docker) staticBinary() (string, error) {
	howTo := "build one with `CGO_ENABLED=0 go build -o rlverify ./cmd/rlverify` and pass it in " + EnvBinary +
		", or build the image with scripts/build-images.sh"
	if runtime.GOOS != "linux" && d.Binary == "" && os.Getenv(EnvBinary) == "" {
		return "", fmt.Errorf("this executable is a %s binary; containers need a linux one: %s", runtime.GOOS, howTo)
	}
	bin := firstNonEmpty(d.Binary, os.Getenv(EnvBinary))
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", fmt.Errorf("locate this executable: %w; %s", err, howTo)
		}
		bin = exe
	}
	static, err := isStaticELF(bin)
	if err != nil {
		return "", fmt.Errorf("%s: %w; %s", bin, err, howTo)
	}
	if !static {
		return "", fmt.Errorf("%s is dynamically linked and cannot run in a FROM scratch image: %s", bin, howTo)
	}
	return bin, nil
}

// isStaticELF reports whether file is an ELF executable without a program
// interpreter (a static binary).
func isStaticELF(file string) (bool, error) {
	f, err := elf.Open(file)
	if err != nil {
		return false, fmt.Errorf("not a linux executable: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// BuildLimiterImage builds the FROM scratch limiter image tagged image from
// the static binary bin with the classic builder, pulling nothing.
func BuildLimiterImage(ctx context.Context, cli *client.Client, image, bin string) error {
	data, err := os.ReadFile(bin)
	if err != nil {
		return fmt.Errorf("build %s: %w", image, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, mode int64, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	if err := errors.Join(add("Dockerfile", 0o644, []byte(limiterDockerfile)), add("rlverify", 0o755, data), tw.Close()); err != nil {
		return fmt.Errorf("build %s: context: %w", image, err)
	}
	res, err := cli.ImageBuild(ctx, &buf, client.ImageBuildOptions{
		Tags:        []string{image},
		Remove:      true,
		ForceRemove: true,
		PullParent:  false,
		Labels:      map[string]string{"rlverify.image": "limiter"},
	})
	if err != nil {
		return fmt.Errorf("build %s: %w", image, err)
	}
	defer res.Body.Close()
	// The body is a stream of JSON messages; a failed step arrives as one
	// with "error" set.
	dec := json.NewDecoder(res.Body)
	for {
		var m struct {
			Stream string `json:"stream"`
			Error  string `json:"error"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				// The image the tag pointed at before is dangling now:
				// remove it (only our own limiter images are touched).
				f := make(client.Filters).Add("dangling", "true").Add("label", "rlverify.image=limiter")
				_, _ = cli.ImagePrune(ctx, client.ImagePruneOptions{Filters: f})
				return nil
			}
			return fmt.Errorf("build %s: read build output: %w", image, err)
		}
		if m.Error != "" {
			return fmt.Errorf("build %s: %s", image, m.Error)
		}
	}
}
