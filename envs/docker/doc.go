// Package docker is the docker environment: testcontainers-go starts Redis
// and N reference limiter containers on a private network, and faults stop,
// pause or disconnect containers. Only users of --env docker import it (the
// CLI registers it), so the library without it pulls in no Docker code.
//
// docker imports envs, service, limiters and policy.
package docker
