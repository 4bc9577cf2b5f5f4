package fastcodec

import "github.com/switchback-dev/switchback/events"

// DecodeData exposes the payload fast path to the external tests, so they
// can hold it to events.DecodeData.
func DecodeData(t events.Type, data []byte) (events.Event, error) {
	return decodeData(t, data, nil)
}

// ParseUTC exposes the fast path of an event's time to the external tests,
// so they can hold it to time.Parse.
var ParseUTC = parseUTC
