// Command gen writes the SDK types that plugin-sdk/schema describes: the Go
// SDK's arbiter/views_gen.go, the C SDK's arbiter_views.h, the
// AssemblyScript SDK's assembly/views.ts and the Zig SDK's views.zig. Run it with `go generate ./...`
// in plugin-sdk/go (or `go run ./internal/gen`); its test, and `-check`,
// fail when any of them differs from what the schemas give.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// The outputs, relative to plugin-sdk/go.
var (
	schemaDir = filepath.Join("..", "schema")
	goOut     = filepath.Join("arbiter", "views_gen.go")
	cOut      = filepath.Join("..", "c", "arbiter_views.h")
	asOut     = filepath.Join("..", "assemblyscript", "assembly", "views.ts")
	zigOut    = filepath.Join("..", "zig", "views.zig")
)

// generate returns each output path (relative to root, plugin-sdk/go) and its contents.
func generate(root string) (map[string][]byte, error) {
	m, err := load(filepath.Join(root, schemaDir))
	if err != nil {
		return nil, err
	}
	goSrc, err := generateGo(m)
	if err != nil {
		return nil, err
	}
	cSrc, err := generateC(m)
	if err != nil {
		return nil, err
	}
	asSrc, err := generateAS(m)
	if err != nil {
		return nil, err
	}
	zigSrc, err := generateZig(m)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{goOut: goSrc, cOut: cSrc, asOut: asSrc, zigOut: zigSrc}, nil
}

func main() {
	root := flag.String("root", ".", "the plugin-sdk/go directory")
	check := flag.Bool("check", false, "only check that the outputs are up to date")
	flag.Parse()
	outputs, err := generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	stale := false
	for path, want := range outputs {
		full := filepath.Join(*root, path)
		have, _ := os.ReadFile(full)
		if bytes.Equal(have, want) {
			continue
		}
		if *check {
			fmt.Fprintf(os.Stderr, "gen: %s is out of date with plugin-sdk/schema; run `go generate ./...` in plugin-sdk/go\n", full)
			stale = true
			continue
		}
		if err := os.WriteFile(full, want, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
	}
	if stale {
		os.Exit(1)
	}
}
