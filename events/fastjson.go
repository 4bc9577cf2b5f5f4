package events

import "strconv"

// A fast path for the JSON data of the events a history is mostly made of
// (volume and step changes, node starts and completions, the manager's
// scheduling and record of each node): encoding/json's reflection was the
// largest cost left in decoding an event. Like the header fast path it reads
// only the shape json.Marshal writes for these types (one flat object, keys
// spelt exactly as the tags, each once, printable-ASCII strings without
// escapes, canonical integers, no blanks) and gives up on anything else,
// which encoding/json then decides. Whatever it accepts, encoding/json reads
// to the same value (FuzzFlatJSONAgrees).

// decodeFlat fills dst (a pointer to a payload) from data, or returns false
// with dst in an unspecified state; the names in it are shared through ns.
func decodeFlat(data []byte, dst any, ns *names) bool {
	switch d := dst.(type) {
	case *VolumeStateChanged:
		return readFlat(data, func(k, v []byte) int {
			switch string(k) {
			case "volume":
				d.Volume = ns.get(v)
				return 0
			case "from":
				d.From = VolumeState(word(v))
				return 1
			case "to":
				d.To = VolumeState(word(v))
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
	case *NodeStateChanged:
		return readFlat(data, func(k, v []byte) int {
			switch string(k) {
			case "from":
				d.From = NodeState(word(v))
				return 0
			case "to":
				d.To = NodeState(word(v))
				return 1
			case "message":
				d.Message = string(v)
				return 2
			}
			return -1
		}, nil)
	case *NodeUpgradeStarted:
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
			}
			return -1
		}, func(k []byte, n int) int {
			if string(k) == "attempt" {
				d.Attempt = n
				return 3
			}
			return -1
		})
	case *NodeScheduled:
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
	case *NodeFinished:
		return readFlat(data, func(k, v []byte) int {
			switch string(k) {
			case "node":
				d.Node = ns.get(v)
				return 0
			case "state":
				d.State = NodeState(word(v))
				return 1
			case "message":
				d.Message = string(v)
				return 2
			}
			return -1
		}, nil)
	case *UpgradeCompleted:
		return readMessage(data, &d.Message)
	case *NodeUpgradeCompleted:
		return readMessage(data, &d.Message)
	}
	return false
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

// words are the state names, shared rather than allocated for every event
// that names one.
var words = func() map[string]string {
	m := map[string]string{}
	for _, s := range NodeSteps {
		m[string(s)] = string(s)
	}
	for _, s := range []string{
		string(NodeCompleted), string(NodeError), string(NodeCancelled),
		string(VolumePending), string(VolumeSwitchingOver), string(VolumeSwitchedOver),
		string(VolumeSwitchingBack), string(VolumeSwitchedBack), string(VolumeCompleted), string(VolumeError),
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
