//go:build docker

package main

import (
	"context"

	"github.com/rlverify/rlverify/envs"
	"github.com/rlverify/rlverify/envs/docker"
)

// The docker environment (testcontainers-go, moby) is linked only with
// -tags docker: it adds about 140 packages a user auditing their own
// service never starts (docs/architecture.md, "Optional parts").

const (
	redisImageHelp   = "docker env: Redis image (default $" + docker.EnvRedisImage + " or " + docker.DefaultRedisImage + ")"
	limiterImageHelp = "docker env: rlverify image for the limiter instances (default $" + docker.EnvLimiterImage + " or " + docker.DefaultLimiterImage + ")"
)

// dockerEnvironment is the docker environment f describes.
func dockerEnvironment(f *attackFlags) (envs.Environment, error) {
	return docker.Docker{RedisImage: f.docker.redisImage, LimiterImage: f.docker.limiterImage, Binary: f.docker.limiterBinary, NoPull: f.docker.noPull}, nil
}

// dockerAvailable says whether a Docker engine answers.
func dockerAvailable(ctx context.Context) error { return docker.DockerAvailable(ctx) }
