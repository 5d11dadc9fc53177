package reports

import (
	"fmt"
	"net/http"

	"github.com/rlverify/rlverify/internal/human"
)

// Hints say what to change when the target refused the requests
// themselves: a 405 (Method Not Allowed) wants another method, and the
// target's own answer (its Allow header is not kept, its body sample is)
// usually says which. Advice names the request's option fields (a command
// says them as its flags); Answer is the target's, printable.
func (d *Document) Hints() []Hint {
	var out []Hint
	for _, e := range d.Errors {
		if e.Status != http.StatusMethodNotAllowed {
			continue
		}
		said := ""
		if e.Body != "" {
			said = fmt.Sprintf(" It answered: %q.", e.Body)
		}
		out = append(out, Hint{Advice: fmt.Sprintf("%s request(s) got 405 Method Not Allowed from %s: send the method the target expects with Request.Method (and Request.Headers/Request.Body if it takes a body).",
			human.Count(e.Count), Printable(e.URL)), Answer: Printable(said)})
	}
	return out
}

// Hint is advice for the next run, and what the target answered.
type Hint struct{ Advice, Answer string }
