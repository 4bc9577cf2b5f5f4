package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/switchback-dev/switchback/replay"
)

// lineWriter prints timeline lines in one of history's formats: a table,
// JSON (an array, or one object a line while following) or YAML (a list).
type lineWriter struct {
	w      io.Writer
	format string
	follow bool
	lines  []replay.Line
}

func newLineWriter(w io.Writer, format string, follow bool) (*lineWriter, error) {
	switch {
	case format != "table" && format != "json" && format != "yaml":
		return nil, fmt.Errorf("-o %q: want table, json or yaml: %w", format, errUsage)
	case format == "yaml" && follow:
		return nil, fmt.Errorf("-o yaml and --follow: a YAML list never ends; use -o json (one object a line): %w", errUsage)
	}
	return &lineWriter{w: w, format: format, follow: follow}, nil
}

func (l *lineWriter) header() {
	if l.format == "table" {
		fmt.Fprintf(l.w, "%6s  %-25s  %-14s %s\n", "SEQ", "TIME", "NODE", "WHAT")
	}
}

func (l *lineWriter) line(line replay.Line) error {
	switch {
	case l.format == "table":
		_, err := fmt.Fprintln(l.w, line)
		return err
	case l.format == "json" && l.follow:
		return json.NewEncoder(l.w).Encode(line)
	}
	l.lines = append(l.lines, line)
	return nil
}

// skipped says that a message of the stream does not decode: in the table,
// and on the table's side only (the machine formats hold events).
func (l *lineWriter) skipped(seq uint64, err error) {
	if l.format == "table" {
		fmt.Fprintf(l.w, "%6d  (skipped a message that does not decode: %v)\n", seq, err)
	}
}

// flush writes what the array formats gathered.
func (l *lineWriter) flush() error {
	if l.format == "table" {
		return nil
	}
	return writeStructured(l.w, l.format, l.lines)
}
