package attacks

import (
	"context"
	"fmt"

	"github.com/rlverify/rlverify/history"
)

// runMore runs the phase kinds beyond burst, boundary, idle, rate, tenants
// and fault.
func (e *Engine) runMore(ctx context.Context, ph *Phase) (*history.Phase, error) {
	return nil, fmt.Errorf("phase kind %s is not supported by this engine yet", ph.Kind)
}
