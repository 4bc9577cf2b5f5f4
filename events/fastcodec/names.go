package fastcodec

// names shares the strings a stream's payloads repeat (volume and node
// names: a node's volumes each change state several times; the messages of
// those changes, which say where a target is), so that decoding them does
// not allocate each anew. A nil *names shares nothing.
// It is bounded: at maxNames entries it starts afresh, so a long read holds
// no more than the names of its recent events.
type names struct{ m map[string]string }

const maxNames = 4096

// get returns b as a string, the one already made when it was seen before.
func (n *names) get(b []byte) string {
	if n == nil {
		return string(b)
	}
	if s, ok := n.m[string(b)]; ok {
		return s
	}
	s := string(b)
	switch {
	case n.m == nil:
		n.m = make(map[string]string, 64)
	case len(n.m) >= maxNames:
		clear(n.m)
	}
	n.m[s] = s
	return s
}
