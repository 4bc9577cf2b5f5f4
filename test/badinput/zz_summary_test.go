package badinput_test

import (
	"os"
	"testing"
)

// TestZZSummary prints the catalogue's table. It is the last test of the
// package (files and tests run in order, and no top-level test of this
// package is parallel), so it sees every case that ran.
func TestZZSummary(t *testing.T) {
	printCatalogue(os.Stdout)
}
