package main

// Reading plugin-sdk/schema into the generator's model: the hook request
// and response types and the view types they refer to, each field with its
// JSON name, kind, default and description.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// schema is the subset of JSON Schema (draft 2020-12) that schemars emits
// for the host's types.
type schema struct {
	Type                 json.RawMessage    `json:"type"`
	Format               string             `json:"format"`
	Ref                  string             `json:"$ref"`
	AnyOf                []*schema          `json:"anyOf"`
	Items                *schema            `json:"items"`
	AdditionalProperties json.RawMessage    `json:"additionalProperties"`
	Properties           map[string]*schema `json:"properties"`
	Required             []string           `json:"required"`
	Default              json.RawMessage    `json:"default"`
	Description          string             `json:"description"`
	Title                string             `json:"title"`
	Defs                 map[string]*schema `json:"$defs"`
}

type tag int

const (
	tString tag = iota
	tFloat
	tInt64
	tUint32
	tBool
	tAny
	tStruct
	tMap
	tArray
	tNullable
)

// kind is the type of one value.
type kind struct {
	tag  tag
	elem *kind  // tMap, tArray, tNullable
	name string // tStruct: the Go type name
}

type field struct {
	json        string
	kind        kind
	def         json.RawMessage // the schema's default, if any
	required    bool
	description string
}

type structType struct {
	name        string // Go name: Workload, WeightRequest
	schemaName  string // schema name: WorkloadView, WeightInput
	description string
	fields      []field // sorted by JSON name
	request     bool    // a hook request, or reachable from one
	response    bool
	hook        string // for a top-level request or response: the hook
}

type model struct {
	structs map[string]*structType
	// hooks in file order, with their request and response type names
	hooks []hookTypes
}

type hookTypes struct {
	hook, request, response string
}

// hookOrder is Hook::ALL's order.
var hookOrder = []string{"admission", "weight", "fairShare", "autoscale", "flavor", "placement"}

func load(dir string) (*model, error) {
	m := &model{structs: map[string]*structType{}}
	defSource := map[string]string{} // Go name -> canonical JSON of its schema
	for _, hook := range hookOrder {
		h := hookTypes{hook: hook}
		for _, part := range []string{"request", "response"} {
			path := filepath.Join(dir, hook+"."+part+".json")
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			var s schema
			if err := json.Unmarshal(data, &s); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			names := make([]string, 0, len(s.Defs))
			for name := range s.Defs {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				def := s.Defs[name]
				canon, err := json.Marshal(def)
				if err != nil {
					return nil, err
				}
				goName := viewName(name)
				if prev, ok := defSource[goName]; ok {
					if prev != string(canon) {
						return nil, fmt.Errorf("%s: $defs.%s differs from the one of the same name in another schema", path, name)
					}
					continue
				}
				defSource[goName] = string(canon)
				st, err := newStruct(goName, name, def, path+" $defs."+name)
				if err != nil {
					return nil, err
				}
				m.structs[goName] = st
			}
			goName := upper(hook) + upper(part)
			st, err := newStruct(goName, s.Title, &s, path)
			if err != nil {
				return nil, err
			}
			st.hook = hook
			m.structs[goName] = st
			if part == "request" {
				h.request = goName
			} else {
				h.response = goName
			}
		}
		m.hooks = append(m.hooks, h)
	}
	for _, h := range m.hooks {
		m.mark(h.request, func(s *structType) *bool { return &s.request })
		m.mark(h.response, func(s *structType) *bool { return &s.response })
	}
	for _, st := range m.structs {
		for _, f := range st.fields {
			if err := m.checkRefs(f.kind); err != nil {
				return nil, fmt.Errorf("%s.%s: %w", st.schemaName, f.json, err)
			}
		}
	}
	return m, nil
}

func (m *model) checkRefs(k kind) error {
	switch k.tag {
	case tStruct:
		if m.structs[k.name] == nil {
			return fmt.Errorf("refers to the unknown type %s", k.name)
		}
	case tMap, tArray, tNullable:
		return m.checkRefs(*k.elem)
	}
	return nil
}

// mark sets a flag on name and every struct reachable from it.
func (m *model) mark(name string, flag func(*structType) *bool) {
	st := m.structs[name]
	if st == nil || *flag(st) {
		return
	}
	*flag(st) = true
	for _, f := range st.fields {
		for k := f.kind; ; k = *k.elem {
			if k.tag == tStruct {
				m.mark(k.name, flag)
			}
			if k.elem == nil {
				break
			}
		}
	}
}

// sorted returns the structs with the flag set, by name.
func (m *model) sorted(keep func(*structType) bool) []*structType {
	var out []*structType
	for _, st := range m.structs {
		if keep(st) {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func newStruct(name, schemaName string, s *schema, where string) (*structType, error) {
	st := &structType{name: name, schemaName: schemaName, description: s.Description}
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := s.Properties[n]
		k, err := resolve(p)
		if err != nil {
			return nil, fmt.Errorf("%s: property %s: %w", where, n, err)
		}
		st.fields = append(st.fields, field{
			json: n, kind: k, def: p.Default, required: required[n], description: p.Description,
		})
	}
	return st, nil
}

func resolve(s *schema) (kind, error) {
	if s.Ref != "" {
		const prefix = "#/$defs/"
		if !strings.HasPrefix(s.Ref, prefix) {
			return kind{}, fmt.Errorf("unsupported $ref %q", s.Ref)
		}
		return kind{tag: tStruct, name: viewName(strings.TrimPrefix(s.Ref, prefix))}, nil
	}
	if len(s.AnyOf) > 0 {
		var other *schema
		nulls := 0
		for _, a := range s.AnyOf {
			if string(a.Type) == `"null"` {
				nulls++
			} else {
				other = a
			}
		}
		if len(s.AnyOf) != 2 || nulls != 1 {
			return kind{}, fmt.Errorf("unsupported anyOf (only [T, null] is)")
		}
		k, err := resolve(other)
		if err != nil {
			return kind{}, err
		}
		return kind{tag: tNullable, elem: &k}, nil
	}
	if len(s.Type) == 0 {
		return kind{tag: tAny}, nil
	}
	var types []string
	if s.Type[0] == '[' {
		if err := json.Unmarshal(s.Type, &types); err != nil {
			return kind{}, err
		}
	} else {
		var one string
		if err := json.Unmarshal(s.Type, &one); err != nil {
			return kind{}, err
		}
		types = []string{one}
	}
	if len(types) == 2 && types[1] == "null" {
		inner := *s
		inner.Type, _ = json.Marshal(types[0])
		k, err := resolve(&inner)
		if err != nil {
			return kind{}, err
		}
		return kind{tag: tNullable, elem: &k}, nil
	}
	if len(types) != 1 {
		return kind{}, fmt.Errorf("unsupported type list %s", s.Type)
	}
	switch types[0] {
	case "string":
		return kind{tag: tString}, nil
	case "boolean":
		return kind{tag: tBool}, nil
	case "number":
		return kind{tag: tFloat}, nil
	case "integer":
		switch s.Format {
		case "int64":
			return kind{tag: tInt64}, nil
		case "uint32":
			return kind{tag: tUint32}, nil
		}
		return kind{}, fmt.Errorf("unsupported integer format %q", s.Format)
	case "array":
		if s.Items == nil {
			return kind{}, fmt.Errorf("array without items")
		}
		k, err := resolve(s.Items)
		if err != nil {
			return kind{}, err
		}
		return kind{tag: tArray, elem: &k}, nil
	case "object":
		if len(s.AdditionalProperties) == 0 || bytes.Equal(s.AdditionalProperties, []byte("true")) {
			return kind{}, fmt.Errorf("inline objects are not supported (only maps and $refs)")
		}
		var ap schema
		if err := json.Unmarshal(s.AdditionalProperties, &ap); err != nil {
			return kind{}, err
		}
		k, err := resolve(&ap)
		if err != nil {
			return kind{}, err
		}
		return kind{tag: tMap, elem: &k}, nil
	}
	return kind{}, fmt.Errorf("unsupported type %q", types[0])
}

// viewName: WorkloadView -> Workload.
func viewName(schemaName string) string {
	return strings.TrimSuffix(schemaName, "View")
}

func upper(s string) string {
	return strings.ToUpper(s[:1]) + s[1:]
}

// snake: ageSeconds -> age_seconds.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r + 'a' - 'A')
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}
