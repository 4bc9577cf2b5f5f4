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
	var err error
	var ev Event
	switch t {
	case TypeVolumeStateChanged:
		var v VolumeStateChanged
		err = decodeGeneralJSON(data, &v)
		ev = v
	case TypeNodeStateChanged:
		var v NodeStateChanged
		err = decodeGeneralJSON(data, &v)
		ev = v
	case TypeNodeUpgradeStarted:
		var v NodeUpgradeStarted
		err = decodeGeneralJSON(data, &v)
		ev = v
	case TypeNodeScheduled:
		var v NodeScheduled
		err = decodeGeneralJSON(data, &v)
		ev = v
	case TypeNodeFinished:
		var v NodeFinished
		err = decodeGeneralJSON(data, &v)
		ev = v
	case TypeUpgradeCompleted:
		var v UpgradeCompleted
		err = decodeGeneralJSON(data, &v)
		ev = v
	case TypeNodeUpgradeCompleted:
		var v NodeUpgradeCompleted
		err = decodeGeneralJSON(data, &v)
		ev = v
	default:
		return DecodeData(t, data)
	}
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

// EncodeGeneral exposes Encode's general path.
var EncodeGeneral = encodeGeneral
