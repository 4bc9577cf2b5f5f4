// Package fuzzinput turns a fuzzer's input bytes into the choices a test
// generator makes, for the fuzz tests of the aggregates and the planner.
package fuzzinput

// Choices is a deterministic source of choices; once the input is used up it
// answers 0, so every input is a finite, valid program.
type Choices struct {
	b []byte
	i int
}

// New reads choices from data.
func New(data []byte) *Choices { return &Choices{b: data} }

// Byte returns the next input byte, or 0 once the input is used up.
func (c *Choices) Byte() byte {
	if c.i >= len(c.b) {
		return 0
	}
	c.i++
	return c.b[c.i-1]
}

// Pick returns a number in [0, n).
func (c *Choices) Pick(n int) int { return int(c.Byte()) % n }

// Coin returns true or false.
func (c *Choices) Coin() bool { return c.Byte()&1 == 1 }

// Done says whether the input is used up.
func (c *Choices) Done() bool { return c.i >= len(c.b) }

// OrEmpty returns s, or now and then (one time in five) the empty string,
// for the optional fields of generated payloads and commands.
func (c *Choices) OrEmpty(s string) string {
	if c.Pick(5) == 0 {
		return ""
	}
	return s
}
