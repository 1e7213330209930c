package main

// The AssemblyScript output: plugin-sdk/assemblyscript/assembly/views.ts —
// a class per view, request and response with the schema's defaults, a
// decoder per request type and view (against the reader in
// assembly/json.ts), an encoder per response type, and per hook the
// function a plugin's one-line export calls.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// asGen collects the helper functions that composite kinds need (maps,
// arrays and nullables of anything), one per distinct kind.
type asGen struct {
	helpers map[string]string // name -> source
}

func asType(k kind) string {
	switch k.tag {
	case tString:
		return "string"
	case tFloat:
		return "f64"
	case tInt64:
		return "i64"
	case tUint32:
		return "u32"
	case tBool:
		return "bool"
	case tAny:
		return "Json"
	case tStruct:
		return k.name
	case tMap:
		return "Map<string, " + asType(*k.elem) + ">"
	case tArray:
		return "Array<" + asType(*k.elem) + ">"
	case tNullable:
		switch k.elem.tag {
		case tFloat, tInt64, tUint32, tBool:
			return "Box<" + asType(*k.elem) + "> | null"
		}
		return asType(*k.elem) + " | null"
	}
	panic("unknown kind")
}

// asMangle names a kind for its helper functions: Map_Array_string.
func asMangle(k kind) string {
	switch k.tag {
	case tMap:
		return "Map_" + asMangle(*k.elem)
	case tArray:
		return "Array_" + asMangle(*k.elem)
	case tNullable:
		return "Nullable_" + asMangle(*k.elem)
	}
	return strings.NewReplacer("<", "_", ">", "", ", ", "_").Replace(asType(k))
}

// asZero is a field's initialiser before its default applies.
func asZero(k kind) string {
	switch k.tag {
	case tString:
		return `""`
	case tFloat:
		return "0.0"
	case tInt64, tUint32:
		return "0"
	case tBool:
		return "false"
	case tAny:
		return "new Json()"
	case tNullable:
		return "null"
	}
	return "new " + asType(k) + "()"
}

// decoder is the name of a function (r: Reader) => T decoding kind k.
func (g *asGen) decoder(k kind) string {
	switch k.tag {
	case tString:
		return "readString"
	case tFloat:
		return "readF64"
	case tInt64:
		return "readI64"
	case tUint32:
		return "readU32"
	case tBool:
		return "readBool"
	case tAny:
		return "readJson"
	case tStruct:
		return "decode" + k.name
	}
	name := "decode" + asMangle(k)
	if _, ok := g.helpers[name]; ok {
		return name
	}
	var body string
	switch k.tag {
	case tMap:
		body = fmt.Sprintf("  const v = new %s();\n  let first = true;\n  if (!r.beginObject()) return v;\n"+
			"  while (r.member(first)) {\n    first = false;\n    const key = r.keyString();\n    v.set(key, %s(r));\n  }\n  return v;\n",
			asType(k), g.decoder(*k.elem))
	case tArray:
		body = fmt.Sprintf("  const v = new %s();\n  let first = true;\n  if (!r.beginArray()) return v;\n"+
			"  while (r.element(first)) {\n    first = false;\n    v.push(%s(r));\n  }\n  return v;\n",
			asType(k), g.decoder(*k.elem))
	case tNullable:
		inner := g.decoder(*k.elem) + "(r)"
		if strings.HasPrefix(asType(k), "Box<") {
			inner = fmt.Sprintf("new Box<%s>(%s)", asType(*k.elem), inner)
		}
		body = fmt.Sprintf("  if (r.takeNull()) return null;\n  return %s;\n", inner)
	}
	g.helpers[name] = fmt.Sprintf("function %s(r: Reader): %s {\n%s}\n", name, asType(k), body)
	return name
}

// encoder is the name of a function (w: Writer, v: T) => void encoding kind k.
func (g *asGen) encoder(k kind) string {
	switch k.tag {
	case tString:
		return "writeString"
	case tFloat:
		return "writeF64"
	case tInt64:
		return "writeI64"
	case tUint32:
		return "writeU32"
	case tBool:
		return "writeBool"
	case tAny:
		return "writeJson"
	case tStruct:
		return "encode" + k.name
	}
	name := "encode" + asMangle(k)
	if _, ok := g.helpers[name]; ok {
		return name
	}
	var body string
	switch k.tag {
	case tMap:
		body = fmt.Sprintf("  const keys = v.keys();\n  keys.sort();\n  w.byte(0x7b);\n"+
			"  for (let i = 0; i < keys.length; i++) {\n    if (i > 0) w.byte(0x2c);\n"+
			"    writeString(w, keys[i]);\n    w.byte(0x3a);\n    %s(w, v.get(keys[i]));\n  }\n  w.byte(0x7d);\n",
			g.encoder(*k.elem))
	case tArray:
		body = fmt.Sprintf("  w.byte(0x5b);\n  for (let i = 0; i < v.length; i++) {\n    if (i > 0) w.byte(0x2c);\n"+
			"    %s(w, v[i]);\n  }\n  w.byte(0x5d);\n", g.encoder(*k.elem))
	case tNullable:
		inner := "v"
		if strings.HasPrefix(asType(k), "Box<") {
			inner = "v.value"
		}
		body = fmt.Sprintf("  if (v === null) {\n    w.ascii(\"null\");\n    return;\n  }\n  %s(w, %s);\n",
			g.encoder(*k.elem), inner)
	}
	g.helpers[name] = fmt.Sprintf("function %s(w: Writer, v: %s): void {\n%s}\n", name, asType(k), body)
	return name
}

// asDefaults are the statements giving target the JSON default raw: target
// holds its zero value, or (nested) its class's default.
func asDefaults(m *model, k kind, raw json.RawMessage, target string, nested bool) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	switch k.tag {
	case tFloat, tInt64, tUint32:
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || (f == 0 && !nested) {
			return nil, err
		}
		return []string{fmt.Sprintf("%s = %s;", target, string(raw))}, nil
	case tBool:
		if string(raw) == "true" || nested {
			return []string{fmt.Sprintf("%s = %s;", target, raw)}, nil
		}
		return nil, nil
	case tString:
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if s == "" && !nested {
			return nil, nil
		}
		return []string{fmt.Sprintf("%s = %s;", target, strconv.Quote(s))}, nil
	case tMap, tArray:
		if string(raw) == "{}" || string(raw) == "[]" {
			return nil, nil
		}
	case tStruct:
		var members map[string]json.RawMessage
		if err := json.Unmarshal(raw, &members); err != nil {
			return nil, err
		}
		var out []string
		for _, f := range m.structs[k.name].fields {
			value, ok := members[f.json]
			if !ok {
				value = f.def
			}
			if bytes.Equal(value, f.def) {
				continue // the member's class applies its own default
			}
			more, err := asDefaults(m, f.kind, value, target+"."+f.json, true)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported default %s for a %s", raw, asType(k))
}

func asComment(b *bytes.Buffer, indent, text string) {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) == 1 {
		fmt.Fprintf(b, "%s/** %s */\n", indent, lines[0])
		return
	}
	fmt.Fprintf(b, "%s/**\n", indent)
	for _, line := range lines {
		b.WriteString(strings.TrimRight(fmt.Sprintf("%s * %s", indent, line), " ") + "\n")
	}
	fmt.Fprintf(b, "%s */\n", indent)
}

// hookExport: fairShare -> fair_share.
func hookExport(hook string) string { return snake(hook) }

func generateAS(m *model) ([]byte, error) {
	g := &asGen{helpers: map[string]string{}}
	var b bytes.Buffer
	b.WriteString(`// Code generated by plugin-sdk/go/internal/gen from plugin-sdk/schema; DO NOT EDIT.

// The hook requests, their views and the responses as classes, with the
// default each missing member takes; a decoder per request type and view,
// an encoder per response; and per hook the function its export calls
// (see README.md). A nullable number or bool is a Box<T> | null; params
// and other untyped values are Json (the value's JSON text).

import {
  Box, Json, Reader, Writer, readBool, readF64, readI64, readJson, readString, readU32,
  writeBool, writeF64, writeI64, writeJson, writeString, writeU32,
} from "./json";

`)
	for _, st := range m.sorted(func(*structType) bool { return true }) {
		what := "The view " + st.schemaName
		switch {
		case st.hook != "" && strings.HasSuffix(st.name, "Request"):
			what = fmt.Sprintf("The `%s` hook's request (%s)", st.hook, st.schemaName)
		case st.hook != "":
			what = fmt.Sprintf("The `%s` hook's response (%s)", st.hook, st.schemaName)
		}
		doc := what + "."
		if st.description != "" {
			doc += "\n\n" + strings.TrimSpace(st.description)
		}
		asComment(&b, "", doc)
		fmt.Fprintf(&b, "export class %s {\n", st.name)
		var ctor []string
		for _, f := range st.fields {
			if f.description != "" {
				asComment(&b, "  ", f.description)
			}
			fmt.Fprintf(&b, "  %s: %s = %s;\n", f.json, asType(f.kind), asZero(f.kind))
			stmts, err := asDefaults(m, f.kind, f.def, "this."+f.json, false)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", st.schemaName, f.json, err)
			}
			ctor = append(ctor, stmts...)
		}
		if len(ctor) > 0 {
			b.WriteString("  constructor() {\n")
			for _, s := range ctor {
				fmt.Fprintf(&b, "    %s\n", s)
			}
			b.WriteString("  }\n")
		}
		b.WriteString("}\n\n")

		if st.request {
			fmt.Fprintf(&b, "/** Decodes %s from JSON: a missing member takes its default, an unknown one is skipped. */\n", st.name)
			fmt.Fprintf(&b, "export function decode%s(r: Reader): %s {\n  const v = new %s();\n", st.name, st.name, st.name)
			b.WriteString("  let first = true;\n  if (!r.beginObject()) return v;\n  while (r.member(first)) {\n    first = false;\n")
			for i, f := range st.fields {
				elseKw := "} else if"
				if i == 0 {
					elseKw = "if"
				}
				fmt.Fprintf(&b, "    %s (r.keyIs(%q)) {\n      v.%s = %s(r);\n", elseKw, f.json, f.json, g.decoder(f.kind))
			}
			if len(st.fields) > 0 {
				b.WriteString("    } else {\n      r.skip();\n    }\n")
			} else {
				b.WriteString("    r.skip();\n")
			}
			b.WriteString("  }\n  return v;\n}\n\n")
		}
		if st.response {
			fmt.Fprintf(&b, "/** Encodes %s as JSON. */\n", st.name)
			fmt.Fprintf(&b, "export function encode%s(w: Writer, v: %s): void {\n", st.name, st.name)
			for i, f := range st.fields {
				sep := ","
				if i == 0 {
					sep = "{"
				}
				fmt.Fprintf(&b, "  w.ascii(%q);\n  %s(w, v.%s);\n", sep+`"`+f.json+`":`, g.encoder(f.kind), f.json)
			}
			if len(st.fields) == 0 {
				b.WriteString("  w.byte(0x7b);\n")
			}
			b.WriteString("  w.byte(0x7d);\n}\n\n")
		}
	}
	for _, h := range m.hooks {
		fmt.Fprintf(&b, "/**\n * Runs the `%s` hook: decodes the request the host wrote at ptr..ptr+len,\n", h.hook)
		fmt.Fprintf(&b, " * calls handler and returns where its encoded response lies; handler's\n")
		fmt.Fprintf(&b, " * null (or a request that does not decode) fails the call. Export it as\n")
		fmt.Fprintf(&b, " * `export function arbiter_%s(ptr: usize, len: usize): u64 { return %s(ptr, len, handler); }`.\n */\n",
			hookExport(h.hook), h.hook)
		fmt.Fprintf(&b, "export function %s(ptr: usize, len: usize, handler: (request: %s) => %s | null): u64 {\n",
			h.hook, h.request, h.response)
		fmt.Fprintf(&b, "  const r = new Reader(ptr, len);\n  const request = decode%s(r);\n  if (!r.finish()) return 0;\n", h.request)
		fmt.Fprintf(&b, "  const response = handler(request);\n  if (response === null) return 0;\n")
		fmt.Fprintf(&b, "  const w = new Writer();\n  encode%s(w, response);\n  return w.result();\n}\n\n", h.response)
	}
	b.WriteString("/**\n * Every name `arbiter_weight_fields` may declare (plugin-sdk/ABI.md \"Lean\n")
	b.WriteString(" * weight requests\"): `workloads.<field>` for each workload field, then the\n * context maps.\n */\n")
	b.WriteString("export const WEIGHT_FIELD_NAMES: string[] = [\n")
	for _, name := range weightFieldNames(m) {
		fmt.Fprintf(&b, "  %q,\n", name)
	}
	b.WriteString("];\n")
	names := make([]string, 0, len(g.helpers))
	for name := range g.helpers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		b.WriteString("\n" + g.helpers[name])
	}
	return b.Bytes(), nil
}

// weightFieldNames lists the names `arbiter_weight_fields` may declare:
// `workloads.<field>` for each workload field, then the context maps.
func weightFieldNames(m *model) []string {
	var out []string
	weight := m.structs["WeightRequest"]
	for _, f := range weight.fields {
		if f.json == "workloads" {
			for _, wf := range m.structs[f.kind.elem.name].fields {
				out = append(out, "workloads."+wf.json)
			}
		}
	}
	for _, f := range weight.fields {
		if f.kind.tag == tMap {
			out = append(out, f.json)
		}
	}
	return out
}
