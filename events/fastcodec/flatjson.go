package fastcodec

import (
	"strconv"

	"github.com/switchback-dev/switchback/events"
)

// A fast path for the JSON data of the events a history is mostly made of
// (volume and step changes, node starts and completions, the manager's
// scheduling and record of each node): encoding/json's reflection was the
// largest cost left in decoding an event. Like the header fast path it reads
// only the shape json.Marshal writes for these types (one flat object, keys
// spelt exactly as the tags, each once, printable-ASCII strings without
// escapes, canonical integers, no blanks) and gives up on anything else,
// which encoding/json then decides. Whatever it accepts, encoding/json reads
// to the same value (FuzzFlatJSONAgrees).

// decodeData is events.DecodeData, the hot types read by the flat reader
// and their names shared through ns (nil: none). Each payload is read into a
// variable on the stack by a direct call and boxed once, for the validation
// and the caller: this runs for every event a replay reads.
func decodeData(t events.Type, data []byte, ns *names) (events.Event, error) {
	var ev events.Event
	switch t {
	case events.TypeVolumeStateChanged:
		var v events.VolumeStateChanged
		if readVolumeStateChanged(data, &v, ns) {
			ev = v
		}
	case events.TypeNodeStateChanged:
		var v events.NodeStateChanged
		if readNodeStateChanged(data, &v) {
			ev = v
		}
	case events.TypeNodeUpgradeStarted:
		var v events.NodeUpgradeStarted
		if readNodeUpgradeStarted(data, &v, ns) {
			ev = v
		}
	case events.TypeNodeScheduled:
		var v events.NodeScheduled
		if readNodeScheduled(data, &v, ns) {
			ev = v
		}
	case events.TypeNodeFinished:
		var v events.NodeFinished
		if readNodeFinished(data, &v, ns) {
			ev = v
		}
	case events.TypeUpgradeCompleted:
		var v events.UpgradeCompleted
		if readMessage(data, &v.Message) {
			ev = v
		}
	case events.TypeNodeUpgradeCompleted:
		var v events.NodeUpgradeCompleted
		if readMessage(data, &v.Message) {
			ev = v
		}
	}
	// What the flat reader refuses, or reads to an invalid payload, is the
	// reference's to decode and word.
	if ev != nil && events.Validate(ev) == nil {
		return ev, nil
	}
	return events.DecodeData(t, data)
}

// readVolumeStateChanged reads an events.VolumeStateChanged.
func readVolumeStateChanged(data []byte, d *events.VolumeStateChanged, ns *names) bool {
	return readFlat(data, func(k, v []byte) int {
		switch string(k) {
		case "volume":
			d.Volume = ns.get(v)
			return 0
		case "from":
			d.From = events.VolumeState(word(v))
			return 1
		case "to":
			d.To = events.VolumeState(word(v))
			return 2
		case "targetNode":
			d.TargetNode = ns.get(v)
			return 3
		case "message":
			d.Message = ns.get(v)
			return 4
		case "engineNodeBefore":
			before := ns.get(v)
			d.EngineNodeBefore = &before
			return 5
		}
		return -1
	}, nil)
}

// readNodeStateChanged reads an events.NodeStateChanged.
func readNodeStateChanged(data []byte, d *events.NodeStateChanged) bool {
	return readFlat(data, func(k, v []byte) int {
		switch string(k) {
		case "from":
			d.From = events.NodeState(word(v))
			return 0
		case "to":
			d.To = events.NodeState(word(v))
			return 1
		case "message":
			d.Message = string(v)
			return 2
		}
		return -1
	}, nil)
}

// readNodeUpgradeStarted reads an events.NodeUpgradeStarted.
func readNodeUpgradeStarted(data []byte, d *events.NodeUpgradeStarted, ns *names) bool {
	return readFlat(data, func(k, v []byte) int {
		switch string(k) {
		case "node":
			d.Node = ns.get(v)
			return 0
		case "dataEngine":
			d.DataEngine = string(v)
			return 1
		case "instanceManagerImage":
			d.InstanceManagerImage = string(v)
			return 2
		case "longhornProfile":
			d.LonghornProfile = string(v)
			return 4
		case "initiatorPolicy":
			d.InitiatorPolicy = word(v)
			return 5
		case "replicaPolicy":
			d.ReplicaPolicy = word(v)
			return 6
		}
		return -1
	}, func(k []byte, n int) int {
		if string(k) == "attempt" {
			d.Attempt = n
			return 3
		}
		return -1
	})
}

// readNodeScheduled reads an events.NodeScheduled.
func readNodeScheduled(data []byte, d *events.NodeScheduled, ns *names) bool {
	return readFlat(data, func(k, v []byte) int {
		if string(k) == "node" {
			d.Node = ns.get(v)
			return 0
		}
		return -1
	}, func(k []byte, n int) int {
		if string(k) == "attempt" {
			d.Attempt = n
			return 1
		}
		return -1
	})
}

// readNodeFinished reads an events.NodeFinished.
func readNodeFinished(data []byte, d *events.NodeFinished, ns *names) bool {
	return readFlat(data, func(k, v []byte) int {
		switch string(k) {
		case "node":
			d.Node = ns.get(v)
			return 0
		case "state":
			d.State = events.NodeState(word(v))
			return 1
		case "message":
			d.Message = string(v)
			return 2
		}
		return -1
	}, nil)
}

// readMessage reads a payload whose only member is an optional message.
func readMessage(data []byte, msg *string) bool {
	return readFlat(data, func(k, v []byte) int {
		if string(k) == "message" {
			*msg = string(v)
			return 0
		}
		return -1
	}, nil)
}

// readFlat walks one flat JSON object, handing each string member to str and
// each integer member to num (nil: no integer fields); they return the
// field's index, or -1 for a key they do not know. Any deviation from the
// canonical shape, an unknown key or a repeated one returns false.
func readFlat(data []byte, str func(k, v []byte) int, num func(k []byte, n int) int) bool {
	if len(data) < 2 || data[0] != '{' || data[len(data)-1] != '}' {
		return false
	}
	if len(data) == 2 {
		return true // {}: every field left empty
	}
	i, end := 1, len(data)-1
	var seen uint64
	for {
		k, next, ok := flatString(data, i)
		if !ok || next >= end || data[next] != ':' {
			return false
		}
		i = next + 1
		var field int
		if i < end && data[i] == '"' {
			var v []byte
			if v, i, ok = flatString(data, i); !ok {
				return false
			}
			field = str(k, v)
		} else {
			if num == nil {
				return false
			}
			j := i
			if j < end && data[j] == '-' {
				j++
			}
			digits := j
			for j < end && data[j] >= '0' && data[j] <= '9' {
				j++
			}
			if j == digits || (data[digits] == '0' && j > digits+1) {
				return false
			}
			n, err := strconv.Atoi(string(data[i:j]))
			if err != nil {
				return false
			}
			field = num(k, n)
			i = j
		}
		if field < 0 || seen&(1<<field) != 0 {
			return false
		}
		seen |= 1 << field
		if i == end {
			return true
		}
		if data[i] != ',' {
			return false
		}
		i++
	}
}

// flatString reads a JSON string of printable ASCII without escapes starting
// at data[i] (the opening quote); next is the index after the closing quote.
func flatString(data []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return data[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c > 0x7e:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// words are the state and policy names, shared rather than allocated for every event
// that names one.
var words = func() map[string]string {
	m := map[string]string{}
	for _, s := range events.NodeSteps {
		m[string(s)] = string(s)
	}
	for _, s := range []string{
		string(events.NodeCompleted), string(events.NodeError), string(events.NodeCancelled),
		string(events.VolumePending), string(events.VolumeSwitchingOver), string(events.VolumeSwitchedOver),
		string(events.VolumeSwitchingBack), string(events.VolumeSwitchedBack), string(events.VolumeCompleted), string(events.VolumeError),
		events.InitiatorPolicyWait, events.InitiatorPolicyMoveWorkloads,
		events.ReplicaPolicyRebuild, events.ReplicaPolicyAddFirst,
	} {
		m[s] = s
	}
	return m
}()

// word is v as a string, shared when it is a state name.
func word(v []byte) string {
	if w, ok := words[string(v)]; ok {
		return w
	}
	return string(v)
}
