package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The committed outputs are exactly what the schemas generate: edit the
// schemas (`arbiter policy schema plugin-sdk/schema`), then `go generate ./...`.
func TestGeneratedFilesMatchTheSchemas(t *testing.T) {
	root := filepath.Join("..", "..")
	outputs, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(outputs) != 4 {
		t.Fatalf("expected the Go, C, AssemblyScript and Zig outputs, got %d", len(outputs))
	}
	for path, want := range outputs {
		have, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, want) {
			t.Errorf("%s differs from what plugin-sdk/schema generates; run `go generate ./...` in plugin-sdk/go", path)
		}
	}
}

func TestResolveRefusesWhatItCannotMap(t *testing.T) {
	for _, text := range []string{
		`{"type": "object", "properties": {"a": {"type": "string"}}}`,
		`{"anyOf": [{"type": "string"}, {"type": "integer"}]}`,
		`{"type": "integer", "format": "uint8"}`,
		`{"$ref": "other.json#/x"}`,
	} {
		var s schema
		if err := jsonUnmarshal(text, &s); err != nil {
			t.Fatal(err)
		}
		if _, err := resolve(&s); err == nil {
			t.Errorf("%s: resolved, but the generator cannot represent it", text)
		}
	}
}
