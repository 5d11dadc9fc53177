//go:build !unix

package checks

import "time"

func processCPU() time.Duration { return 0 }
