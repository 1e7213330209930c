//go:build !wasip1

package arbiter

import "os"

var levelNames = [...]string{"error", "warn", "info", "debug"}

func writeLog(level Level, message string) {
	name := "debug"
	if level >= 0 && int(level) < len(levelNames) {
		name = levelNames[level]
	}
	os.Stderr.WriteString("[" + name + "] " + message + "\n")
}
