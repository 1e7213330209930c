package arbiter

// The JSON reader and writer the generated code (views_gen.go) is written
// against. No reflection and no encoding/json: a module built with
// encoding/json is about 1.4 MB larger, past the 2 MiB a tenant bundle's
// module may have. The reader accepts any RFC 8259 JSON; it skips
// members it does not know and nests at most maxDepth deep.

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

const maxDepth = 128

// SyntaxError is a request that is not the JSON the schema describes.
type SyntaxError struct {
	Offset int // byte offset in the document
	Msg    string
}

func (e *SyntaxError) Error() string {
	return "invalid request JSON at byte " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

type reader struct {
	data    []byte
	pos     int
	depth   int
	scratch []byte
}

func (r *reader) fail(msg string) error { return &SyntaxError{Offset: r.pos, Msg: msg} }

func (r *reader) missing(name string) error {
	return r.fail("the required member \"" + name + "\" is missing")
}

func (r *reader) ws() {
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

// next is the first byte of the next value (after white space), or 0 at the end.
func (r *reader) next() byte {
	r.ws()
	if r.pos >= len(r.data) {
		return 0
	}
	return r.data[r.pos]
}

func (r *reader) literal(word string) bool {
	if len(r.data)-r.pos >= len(word) && string(r.data[r.pos:r.pos+len(word)]) == word {
		r.pos += len(word)
		return true
	}
	return false
}

// null consumes a `null` if one comes next.
func (r *reader) null() bool {
	return r.next() == 'n' && r.literal("null")
}

func (r *reader) enter() error {
	r.depth++
	if r.depth > maxDepth {
		return r.fail("nested deeper than " + strconv.Itoa(maxDepth))
	}
	return nil
}

// object calls member for each member of an object, with the reader at
// the member's value; member must consume the value.
func (r *reader) object(member func(key []byte) error) error {
	if r.next() != '{' {
		return r.fail("expected an object")
	}
	if err := r.enter(); err != nil {
		return err
	}
	r.pos++
	if r.next() == '}' {
		r.pos++
		r.depth--
		return nil
	}
	for {
		if r.next() != '"' {
			return r.fail("expected a member name")
		}
		key, err := r.stringBytes()
		if err != nil {
			return err
		}
		if r.next() != ':' {
			return r.fail("expected ':'")
		}
		r.pos++
		if err := member(key); err != nil {
			return err
		}
		switch r.next() {
		case ',':
			r.pos++
		case '}':
			r.pos++
			r.depth--
			return nil
		default:
			return r.fail("expected ',' or '}'")
		}
	}
}

// array calls element for each element, with the reader at it.
func (r *reader) array(element func() error) error {
	if r.next() != '[' {
		return r.fail("expected an array")
	}
	if err := r.enter(); err != nil {
		return err
	}
	r.pos++
	if r.next() == ']' {
		r.pos++
		r.depth--
		return nil
	}
	for {
		if err := element(); err != nil {
			return err
		}
		switch r.next() {
		case ',':
			r.pos++
		case ']':
			r.pos++
			r.depth--
			return nil
		default:
			return r.fail("expected ',' or ']'")
		}
	}
}

// stringBytes reads a string token; the result aliases the document when it
// has no escapes, else the reader's scratch buffer (valid until the next call).
func (r *reader) stringBytes() ([]byte, error) {
	if r.next() != '"' {
		return nil, r.fail("expected a string")
	}
	r.pos++
	start := r.pos
	for r.pos < len(r.data) {
		c := r.data[r.pos]
		switch {
		case c == '"':
			r.pos++
			return r.data[start : r.pos-1], nil
		case c == '\\':
			return r.escapedString(start)
		case c < 0x20:
			return nil, r.fail("control character in a string")
		}
		r.pos++
	}
	return nil, r.fail("unterminated string")
}

func (r *reader) escapedString(start int) ([]byte, error) {
	out := append(r.scratch[:0], r.data[start:r.pos]...)
	for r.pos < len(r.data) {
		c := r.data[r.pos]
		switch {
		case c == '"':
			r.pos++
			r.scratch = out
			return out, nil
		case c < 0x20:
			return nil, r.fail("control character in a string")
		case c != '\\':
			out = append(out, c)
			r.pos++
			continue
		}
		if r.pos+1 >= len(r.data) {
			break
		}
		e := r.data[r.pos+1]
		r.pos += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			u, ok := r.hex4()
			if !ok {
				return nil, r.fail("bad \\u escape")
			}
			rn := rune(u)
			if utf16.IsSurrogate(rn) {
				rn = utf8.RuneError
				if r.pos+1 < len(r.data) && r.data[r.pos] == '\\' && r.data[r.pos+1] == 'u' {
					save := r.pos
					r.pos += 2
					if low, ok := r.hex4(); ok {
						if pair := utf16.DecodeRune(rune(u), rune(low)); pair != utf8.RuneError {
							rn = pair
						} else {
							r.pos = save
						}
					} else {
						r.pos = save
					}
				}
			}
			out = utf8.AppendRune(out, rn)
		default:
			return nil, r.fail("bad escape")
		}
	}
	return nil, r.fail("unterminated string")
}

func (r *reader) hex4() (uint16, bool) {
	if len(r.data)-r.pos < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(r.data[r.pos:r.pos+4]), 16, 16)
	if err != nil {
		return 0, false
	}
	r.pos += 4
	return uint16(v), true
}

// number reads a number token, checked against JSON's grammar.
func (r *reader) number() ([]byte, error) {
	r.ws()
	start := r.pos
	d := r.data
	i := r.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	digits := func() bool {
		from := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		return i > from
	}
	if i < len(d) && d[i] == '0' {
		i++
	} else if !digits() {
		return nil, r.fail("expected a number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if !digits() {
			return nil, r.fail("expected digits after '.'")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !digits() {
			return nil, r.fail("expected digits in the exponent")
		}
	}
	r.pos = i
	return d[start:i], nil
}

func (r *reader) str(v *string) error {
	b, err := r.stringBytes()
	if err == nil {
		*v = string(b)
	}
	return err
}

func (r *reader) float(v *float64) error {
	b, err := r.number()
	if err != nil {
		return err
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil && !isRange(err) {
		return r.fail("bad number")
	}
	*v = f
	return nil
}

func isRange(err error) bool {
	e, ok := err.(*strconv.NumError)
	return ok && e.Err == strconv.ErrRange
}

func (r *reader) int64(v *int64) error {
	b, err := r.number()
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return r.fail("expected an integer that fits 64 bits, got " + string(b))
	}
	*v = n
	return nil
}

func (r *reader) uint32(v *uint32) error {
	b, err := r.number()
	if err != nil {
		return err
	}
	n, err := strconv.ParseUint(string(b), 10, 32)
	if err != nil {
		return r.fail("expected an integer in 0..4294967295, got " + string(b))
	}
	*v = uint32(n)
	return nil
}

func (r *reader) boolean(v *bool) error {
	r.ws()
	switch {
	case r.literal("true"):
		*v = true
	case r.literal("false"):
		*v = false
	default:
		return r.fail("expected true or false")
	}
	return nil
}

// value reads any value as raw JSON text (a copy).
func (r *reader) value(v *Value) error {
	r.ws()
	start := r.pos
	if err := r.skip(); err != nil {
		return err
	}
	*v = Value(append([]byte(nil), r.data[start:r.pos]...))
	return nil
}

// skip consumes one value of any kind.
func (r *reader) skip() error {
	switch r.next() {
	case '{':
		return r.object(func([]byte) error { return r.skip() })
	case '[':
		return r.array(r.skip)
	case '"':
		_, err := r.stringBytes()
		return err
	case 't', 'f':
		var b bool
		return r.boolean(&b)
	case 'n':
		if r.null() {
			return nil
		}
	default:
		_, err := r.number()
		return err
	}
	return r.fail("expected a value")
}

func decodeDocument[T any](data []byte, v *T, decode func(*reader, *T) error) error {
	r := reader{data: data}
	if err := decode(&r, v); err != nil {
		return err
	}
	if r.next() != 0 {
		return r.fail("unexpected data after the document")
	}
	return nil
}

func decodeMap[V any](r *reader, m *map[string]V, decode func(*reader, *V) error) error {
	if r.null() {
		return r.fail("expected an object, got null")
	}
	out := *m
	if out == nil {
		out = map[string]V{}
	}
	err := r.object(func(key []byte) error {
		var v V
		if err := decode(r, &v); err != nil {
			return err
		}
		out[string(key)] = v
		return nil
	})
	*m = out
	return err
}

func decodeArray[V any](r *reader, s *[]V, decode func(*reader, *V) error) error {
	out := (*s)[:0]
	err := r.array(func() error {
		var zero V
		out = append(out, zero)
		return decode(r, &out[len(out)-1])
	})
	*s = out
	return err
}

func decodeNullable[V any](r *reader, p **V, decode func(*reader, *V) error) error {
	if r.null() {
		*p = nil
		return nil
	}
	v := new(V)
	if err := decode(r, v); err != nil {
		return err
	}
	*p = v
	return nil
}

// Writing. Output is always valid UTF-8 JSON: invalid UTF-8 in a string is
// written as U+FFFD, a NaN or infinity as null (which the host refuses as a
// bad output, naming the field).

func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		rn, size := utf8.DecodeRuneInString(s[i:])
		if rn == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// appendFloat writes f as encoding/json does: plain decimals for
// 1e-6 <= |f| < 1e21, else exponent form, always the shortest text that
// reads back as f.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	// Integers below 2^53 (exact in a float64) as integers: the same text,
	// several times cheaper than the shortest-float search.
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		if f == 0 && math.Signbit(f) {
			return append(b, "-0"...)
		}
		return strconv.AppendInt(b, int64(f), 10)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 -> 1e-7
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func appendInt64(b []byte, n int64) []byte   { return strconv.AppendInt(b, n, 10) }
func appendUint32(b []byte, n uint32) []byte { return strconv.AppendUint(b, uint64(n), 10) }
func appendBool(b []byte, v bool) []byte     { return strconv.AppendBool(b, v) }

func appendValue(b []byte, v Value) []byte {
	if len(v) == 0 {
		return append(b, "null"...)
	}
	return append(b, v...)
}

// appendMap writes the members in key order.
func appendMap[V any](b []byte, m map[string]V, encode func([]byte, V) []byte) []byte {
	b = append(b, '{')
	for i, key := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, key)
		b = append(b, ':')
		b = encode(b, m[key])
	}
	return append(b, '}')
}

func appendArray[V any](b []byte, s []V, encode func([]byte, V) []byte) []byte {
	b = append(b, '[')
	for i, v := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = encode(b, v)
	}
	return append(b, ']')
}

func appendNullable[V any](b []byte, p *V, encode func([]byte, V) []byte) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return encode(b, *p)
}

// Value is a JSON value kept as its text: the policy's `params` (its
// `config` in bundle.yaml) and any other field the schema leaves untyped.
// The zero Value is JSON null.
type Value []byte

// IsNull reports whether v is null (or absent).
func (v Value) IsNull() bool { return len(v) == 0 || string(v) == "null" }

// Get is member key of an object; nil when v is not an object or has no such member.
func (v Value) Get(key string) Value {
	var found Value
	r := reader{data: v}
	_ = r.object(func(k []byte) error {
		if found == nil && string(k) == key {
			return r.value(&found)
		}
		return r.skip()
	})
	return found
}

// Float is v as a number.
func (v Value) Float() (float64, bool) {
	var f float64
	r := reader{data: v}
	if r.next() == 0 || r.float(&f) != nil || r.next() != 0 {
		return 0, false
	}
	return f, true
}

// Int is v as an integer.
func (v Value) Int() (int64, bool) {
	var n int64
	r := reader{data: v}
	if r.next() == 0 || r.int64(&n) != nil || r.next() != 0 {
		return 0, false
	}
	return n, true
}

// Text is v as a string.
func (v Value) Text() (string, bool) {
	var s string
	r := reader{data: v}
	if r.next() != '"' || r.str(&s) != nil || r.next() != 0 {
		return "", false
	}
	return s, true
}

// Bool is v as a boolean.
func (v Value) Bool() (bool, bool) {
	var b bool
	r := reader{data: v}
	if r.boolean(&b) != nil || r.next() != 0 {
		return false, false
	}
	return b, true
}
