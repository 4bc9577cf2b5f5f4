package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
)

// Decoder turns the JSON data of one CloudEvent type into a payload.
type Decoder func(data []byte) (Event, error)

// validator is implemented by payloads that have required fields or enums.
type validator interface{ validate() error }

var (
	registryMu sync.RWMutex
	registry   = map[Type]Decoder{}
)

func init() {
	register[UpgradeRequested]()
	register[PrecheckPassed]()
	register[PrecheckFailed]()
	register[UpgradePlanned]()
	register[NodeScheduled]()
	register[NodeFinished]()
	register[UpgradeCompleted]()
	register[UpgradeFailed]()
	register[CancelRequested]()
	register[UpgradeCancelled]()
	register[UpgradeHeld]()
	register[UpgradeReleased]()
	register[NodeUpgradeStarted]()
	register[NodeStateChanged]()
	register[VolumeStateChanged]()
	register[NodeStalled]()
	register[NodeResumed]()
	register[NodeUpgradeCompleted]()
	register[NodeUpgradeFailed]()
	register[NodeCancelRequested]()
	register[NodeUpgradeCancelled]()
	register[SchedulingRecorded]()
	register[SchedulingRestored]()
	register[SnapshotsTaken]()
	register[SnapshotsRemoved]()
	register[NodeTainted]()
	register[NodeUntainted]()
	register[PodMoved]()
	register[HashingRequested]()
	register[RebuildPlanned]()
	register[RebuildStarted]()
	register[RebuildFinished]()
	register[TemporaryReplicaRequested]()
	register[ReplicaCountRaised]()
	register[TemporaryReplicaAdded]()
	register[ReplicaCountRestored]()
}

func register[T Event]() {
	var zero T
	registry[zero.EventType()] = decodeJSON[T]
}

func decodeJSON[T Event](data []byte) (Event, error) {
	var v T
	if err := decodeGeneralJSON(data, &v); err != nil {
		return nil, err
	}
	ev := Event(v)
	if err := Validate(ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// decodeGeneralJSON reads data into v with encoding/json.
func decodeGeneralJSON[T any](data []byte, v *T) error {
	// Unmarshal is the cheap path (no decoder and buffer per event). Where it
	// succeeds the stream decoder below reads the same single value; where it
	// fails the decoder decides, so what is accepted does not change.
	if json.Unmarshal(data, v) != nil {
		*v = *new(T)
		return decodeStream(data, v)
	}
	return nil
}

// decodeStream reads one JSON value from data with the stream decoder,
// which (unlike Unmarshal) tolerates some trailing bytes; it was the only
// decoder once, so its verdict is the reference.
func decodeStream(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after JSON object")
	}
	return nil
}

// RegisterUpcaster makes an old (or foreign) event type decodable: up reads the
// old schema and returns the current payload. This is how a type that moved to
// ".v2" keeps its ".v1" history foldable. Registering a known type panics,
// because silently replacing a decoder would change the meaning of history.
func RegisterUpcaster(old Type, up Decoder) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[old]; dup {
		panic(fmt.Sprintf("events: type %q already registered", old))
	}
	registry[old] = up
}

// Known reports whether t can be decoded.
func Known(t Type) bool {
	registryMu.RLock()
	defer registryMu.RUnlock()
	_, ok := registry[t]
	return ok
}

// Types lists every decodable type (for documentation and tests).
func Types() []Type {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]Type, 0, len(registry))
	for t := range registry {
		out = append(out, t)
	}
	return out
}

// DecodeData decodes the JSON data of a CloudEvent of type t.
func DecodeData(t Type, data []byte) (Event, error) {
	registryMu.RLock()
	dec, ok := registry[t]
	registryMu.RUnlock()
	if !ok {
		return nil, &DecodeError{Kind: ErrUnknownType, Type: string(t)}
	}
	ev, err := dec(data)
	if err != nil {
		return nil, &DecodeError{Kind: ErrBadData, Type: string(t), Err: err}
	}
	return ev, nil
}
