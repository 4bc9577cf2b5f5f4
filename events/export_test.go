package events

// DecodeGeneral exposes the general decoding path to the external tests, so
// they can hold the fast path to it.
var DecodeGeneral = decodeGeneral

// DecodeDataGeneral is DecodeData through encoding/json only.
func DecodeDataGeneral(t Type, data []byte) (Event, error) {
	registryMu.RLock()
	_, ok := registry[t]
	registryMu.RUnlock()
	if !ok {
		return nil, &DecodeError{Kind: ErrUnknownType, Type: string(t)}
	}
	general := map[Type]func([]byte) (Event, error){
		TypeVolumeStateChanged:   generalJSON[VolumeStateChanged],
		TypeNodeStateChanged:     generalJSON[NodeStateChanged],
		TypeNodeUpgradeStarted:   generalJSON[NodeUpgradeStarted],
		TypeNodeScheduled:        generalJSON[NodeScheduled],
		TypeNodeFinished:         generalJSON[NodeFinished],
		TypeUpgradeCompleted:     generalJSON[UpgradeCompleted],
		TypeNodeUpgradeCompleted: generalJSON[NodeUpgradeCompleted],
	}[t]
	if general == nil {
		return DecodeData(t, data)
	}
	ev, err := general(data)
	if err == nil {
		if val, ok := ev.(validator); ok {
			err = val.validate()
		}
	}
	if err != nil {
		return nil, &DecodeError{Kind: ErrBadData, Type: string(t), Err: err}
	}
	return ev, nil
}

// generalJSON decodes a T with encoding/json alone.
func generalJSON[T Event](data []byte) (Event, error) {
	var v T
	err := decodeGeneralJSON(data, &v)
	return v, err
}

// EncodeGeneral exposes Encode's general path.
var EncodeGeneral = encodeGeneral

// ParseUTC exposes the fast path of an event's time to the external tests,
// so they can hold it to time.Parse.
var ParseUTC = parseUTC
