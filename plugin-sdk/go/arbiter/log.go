package arbiter

// Level of a log line (ABI levels 0–3).
type Level int32

const (
	Error Level = iota
	Warn
	Info
	Debug
)

// Log writes a line through the host's `arbiter.log` import (the host
// keeps at most 64 lines and 4 KiB per call, in the decision log); off
// wasm, to stderr.
func Log(level Level, message string) { writeLog(level, message) }
