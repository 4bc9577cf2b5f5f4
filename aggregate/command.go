package aggregate

import "time"

// Meta is what every command of an aggregate carries, embedded first: its
// id, from which the ids of the events it produces derive (events.New), so
// that a retried command deduplicates in the stream, and when it was
// issued, the time its events are stamped with.
type Meta struct {
	ID string
	At time.Time
}

// CommandID returns the command's id.
func (m Meta) CommandID() string { return m.ID }

// CommandTime returns when the command was issued.
func (m Meta) CommandTime() time.Time { return m.At }
