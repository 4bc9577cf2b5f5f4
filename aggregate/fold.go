package aggregate

import (
	"errors"
	"fmt"

	"github.com/switchback-dev/switchback/events"
)

// FoldSkipping applies history to s in order with evolve. An event that evolve refuses
// is skipped and its error kept; the errors are returned joined.
//
// Skipping rather than stopping is deliberate: a projection must not freeze on
// one bad event a faulty writer appended, and it makes folding a prefix and
// then the rest equal to folding everything at once, which snapshots rely on.
func FoldSkipping[S any](s S, evolve func(S, events.Envelope) (S, error), history []events.Envelope) (S, error) {
	var errs []error
	for _, e := range history {
		next, err := evolve(s, e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s = next
	}
	return s, errors.Join(errs...)
}

// ValidatePayloads runs the catalogue's payload validation on events a
// decision produced, so Decide never hands out an event the store would refuse
// to encode.
func ValidatePayloads(evs []events.Event) error {
	var errs []error
	for _, e := range evs {
		if err := events.Validate(e); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.EventType(), err))
		}
	}
	return errors.Join(errs...)
}
