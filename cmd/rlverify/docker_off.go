//go:build !docker

package main

import (
	"context"
	"fmt"

	"github.com/rlverify/rlverify/envs"
)

// This build has no docker environment: see docker_on.go.

const (
	redisImageHelp   = "docker env (a build with -tags docker): Redis image"
	limiterImageHelp = "docker env (a build with -tags docker): rlverify image for the limiter instances"
)

// errNoDocker wraps envs.ErrUnavailable: compare skips the column as it
// does when no Docker engine runs.
var errNoDocker = fmt.Errorf("this rlverify was built without the docker environment; build it with: go build -tags docker ./cmd/rlverify: %w", envs.ErrUnavailable)

func dockerEnvironment(*attackFlags) (envs.Environment, error) { return nil, errNoDocker }

func dockerAvailable(context.Context) error { return errNoDocker }
