package limiters

import "errors"

var errorsIs = errors.Is
