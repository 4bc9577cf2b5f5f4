// Package fastcodec encodes and decodes the events a stream is mostly made
// of without the CloudEvents SDK's generic model, for the hot paths: every
// append, load, scan, follow and replay goes through it.
//
// Package events' Encode and DecodeChecked are the reference: they alone
// decide what is refused and how it is worded. This package reads and writes
// only the exact shape events.Encode produces (its headers spelt as it spells
// them, a plain source, a UTC time, the flat JSON json.Marshal writes for the
// hot payloads) and hands everything else to them. The contract, pinned by
// fuzzers (FuzzFastDecodeAgrees, FuzzFlatJSONAgrees, FuzzParseUTCAgrees) and
// by TestEncodeFastAgrees: where the fast path answers, the reference gives
// the same envelope, the same bytes, or the same refusal.
package fastcodec
