// JSON for the generated views (views.ts): a reader over the request the
// host wrote into the guest's memory (UTF-8, read in place; strings are
// decoded only when a view keeps them) and a writer of the response into a
// growing buffer. The reader never reads outside its span and never traps:
// on malformed input it marks itself failed, every read from then on
// returns a default, and the hook fails the call (finish() is false).

import { parseDecimal } from "./atof";

const MAX_DEPTH: i32 = 128;

const QUOTE: u8 = 0x22;
const BACKSLASH: u8 = 0x5c;
const COMMA: u8 = 0x2c;
const COLON: u8 = 0x3a;
const OPEN_OBJECT: u8 = 0x7b;
const CLOSE_OBJECT: u8 = 0x7d;
const OPEN_ARRAY: u8 = 0x5b;
const CLOSE_ARRAY: u8 = 0x5d;

/** A nullable number or bool of a view. */
export class Box<T> {
  constructor(public value: T) {}
}

/**
 * An untyped JSON value (a policy's params): a span of the request, read
 * with reader(); absent (len 0) reads as null.
 */
export class Json {
  constructor(public ptr: usize = 0, public len: usize = 0) {}

  /** Whether the value is absent or JSON null. */
  get isNull(): bool {
    if (this.len == 0) return true;
    const r = this.reader();
    return r.takeNull() && r.finish();
  }

  /** The value's JSON text. */
  get text(): string {
    return this.len == 0 ? "null" : String.UTF8.decodeUnsafe(this.ptr, this.len);
  }

  /** A reader over the value, to decode it with read* and the Reader's methods. */
  reader(): Reader {
    return this.len == 0 ? new Reader(changetype<usize>(NULL_TEXT), 4) : new Reader(this.ptr, this.len);
  }
}

const NULL_TEXT = memory.data<u8>([0x6e, 0x75, 0x6c, 0x6c]);

function isSpace(c: u8): bool {
  return c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09;
}

function isDigit(c: u8): bool {
  return c >= 0x30 && c <= 0x39;
}

function hexValue(c: u8): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

// Powers of ten exact in a double, for the exact fast path of readF64.
const POW10: f64[] = [
  1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
  1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/** A JSON reader over ptr..ptr+len. */
export class Reader {
  pos: usize;
  end: usize;
  /** Set at the first malformed value; everything read after is a default. */
  failed: bool = false;
  private keyStart: usize = 0;
  private keyEnd: usize = 0;
  private keyEscaped: bool = false;
  /** Whether the string scanString last passed holds escapes. */
  lastEscaped: bool = false;

  constructor(ptr: usize, len: usize) {
    this.pos = ptr;
    this.end = ptr + len;
  }

  /** Marks the input malformed. */
  fail(): void {
    this.failed = true;
    this.pos = this.end;
  }

  /** The next byte after whitespace, or -1 at the end. */
  peek(): i32 {
    while (this.pos < this.end && isSpace(load<u8>(this.pos))) this.pos++;
    return this.pos < this.end ? <i32>load<u8>(this.pos) : -1;
  }

  /** True when everything read was well-formed and nothing but whitespace follows. */
  finish(): bool {
    return this.peek() == -1 && !this.failed;
  }

  /** Consumes `{`; false (failed) when the value is not an object. */
  beginObject(): bool {
    if (this.peek() != OPEN_OBJECT) {
      this.fail();
      return false;
    }
    this.pos++;
    return true;
  }

  /**
   * Reads the next member's key (`first` for the first call after
   * beginObject): true when there is one — compare it with keyIs, take it
   * with keyString, then read or skip its value — false at the closing `}`.
   */
  member(first: bool): bool {
    if (this.failed) return false;
    let c = this.peek();
    if (c == CLOSE_OBJECT) {
      this.pos++;
      return false;
    }
    if (!first) {
      if (c != COMMA) {
        this.fail();
        return false;
      }
      this.pos++;
      c = this.peek();
    }
    if (c != QUOTE) {
      this.fail();
      return false;
    }
    this.keyStart = this.pos + 1;
    if (!this.scanString()) return false;
    this.keyEnd = this.pos - 1;
    this.keyEscaped = this.lastEscaped;
    if (this.peek() != COLON) {
      this.fail();
      return false;
    }
    this.pos++;
    return true;
  }

  /** Whether the current key is `name` (ASCII), escapes decoded. */
  keyIs(name: string): bool {
    if (this.keyEscaped) return this.keyString() == name;
    const len = this.keyEnd - this.keyStart;
    if (len != <usize>name.length) return false;
    for (let i: usize = 0; i < len; i++) {
      if (<u32>load<u8>(this.keyStart + i) != <u32>name.charCodeAt(<i32>i)) return false;
    }
    return true;
  }

  /** The current key, escapes decoded. */
  keyString(): string {
    return decodeSpan(this.keyStart, this.keyEnd, this.keyEscaped);
  }

  /** Consumes `[`; false (failed) when the value is not an array. */
  beginArray(): bool {
    if (this.peek() != OPEN_ARRAY) {
      this.fail();
      return false;
    }
    this.pos++;
    return true;
  }

  /** True when another element follows (read or skip it), false at the closing `]`. */
  element(first: bool): bool {
    if (this.failed) return false;
    const c = this.peek();
    if (c == CLOSE_ARRAY) {
      this.pos++;
      return false;
    }
    if (!first) {
      if (c != COMMA) {
        this.fail();
        return false;
      }
      this.pos++;
    }
    return true;
  }

  /** Consumes `null` and returns true, or leaves any other value. */
  takeNull(): bool {
    if (this.peek() == 0x6e && this.literal("null")) return true;
    return false;
  }

  /** Skips one value, checking that it is well-formed. */
  skip(): void {
    this.skipValue(0);
  }

  private skipValue(depth: i32): void {
    const c = this.peek();
    if (c == QUOTE) {
      this.scanString();
    } else if (c == OPEN_OBJECT || c == OPEN_ARRAY) {
      if (depth >= MAX_DEPTH) {
        this.fail();
        return;
      }
      this.pos++;
      let first = true;
      if (c == OPEN_OBJECT) {
        while (this.member(first)) {
          first = false;
          this.skipValue(depth + 1);
        }
      } else {
        while (this.element(first)) {
          first = false;
          this.skipValue(depth + 1);
        }
      }
    } else if (c == 0x74) {
      if (!this.literal("true")) this.fail();
    } else if (c == 0x66) {
      if (!this.literal("false")) this.fail();
    } else if (c == 0x6e) {
      if (!this.literal("null")) this.fail();
    } else if (c == 0x2d || (c >= 0x30 && c <= 0x39)) {
      this.scanNumber();
    } else {
      this.fail();
    }
  }

  /** Consumes word (ASCII) if it comes next. */
  literal(word: string): bool {
    const n = <usize>word.length;
    if (this.end - this.pos < n) return false;
    for (let i: usize = 0; i < n; i++) {
      if (<u32>load<u8>(this.pos + i) != <u32>word.charCodeAt(<i32>i)) return false;
    }
    this.pos += n;
    return true;
  }

  /**
   * At a string's opening quote: moves past its closing quote, noting in
   * lastEscaped whether it holds escapes; false (failed) when malformed.
   */
  scanString(): bool {
    let p = this.pos + 1;
    let escaped = false;
    while (p < this.end) {
      const c = load<u8>(p);
      if (c == QUOTE) {
        this.pos = p + 1;
        this.lastEscaped = escaped;
        return true;
      }
      if (c < 0x20) break;
      if (c == BACKSLASH) {
        escaped = true;
        if (++p >= this.end) break;
        const e = load<u8>(p);
        if (e == 0x75) {
          if (this.end - p <= 4) break;
          if (
            hexValue(load<u8>(p + 1)) < 0 || hexValue(load<u8>(p + 2)) < 0 ||
            hexValue(load<u8>(p + 3)) < 0 || hexValue(load<u8>(p + 4)) < 0
          ) break;
          p += 4;
        } else if (
          e != QUOTE && e != BACKSLASH && e != 0x2f && e != 0x62 && e != 0x66 &&
          e != 0x6e && e != 0x72 && e != 0x74
        ) {
          break;
        }
      }
      p++;
    }
    this.fail();
    return false;
  }

  /** Moves past a number token (JSON's grammar); false (failed) when malformed. */
  scanNumber(): bool {
    let p = this.pos;
    const end = this.end;
    if (p < end && load<u8>(p) == 0x2d) p++;
    if (p < end && load<u8>(p) == 0x30) {
      p++;
    } else if (p < end && isDigit(load<u8>(p))) {
      while (p < end && isDigit(load<u8>(p))) p++;
    } else {
      this.fail();
      return false;
    }
    if (p < end && load<u8>(p) == 0x2e) {
      p++;
      if (p >= end || !isDigit(load<u8>(p))) {
        this.fail();
        return false;
      }
      while (p < end && isDigit(load<u8>(p))) p++;
    }
    if (p < end && (load<u8>(p) | 0x20) == 0x65) {
      p++;
      if (p < end && (load<u8>(p) == 0x2b || load<u8>(p) == 0x2d)) p++;
      if (p >= end || !isDigit(load<u8>(p))) {
        this.fail();
        return false;
      }
      while (p < end && isDigit(load<u8>(p))) p++;
    }
    this.pos = p;
    return true;
  }
}

/** The string of the JSON string body start..end (without quotes). */
function decodeSpan(start: usize, end: usize, escaped: bool): string {
  if (!escaped) return String.UTF8.decodeUnsafe(start, end - start);
  // Decoded UTF-8 is never longer than its escaped text.
  const buf = heap.alloc(end - start);
  let out = buf;
  let p = start;
  while (p < end) {
    const c = load<u8>(p);
    if (c != BACKSLASH) {
      store<u8>(out++, c);
      p++;
      continue;
    }
    const e = load<u8>(p + 1);
    p += 2;
    if (e == 0x75) {
      let cp = hex4(p);
      p += 4;
      if (cp >= 0xd800 && cp < 0xdc00 && end - p >= 6 && load<u8>(p) == BACKSLASH && load<u8>(p + 1) == 0x75) {
        const low = hex4(p + 2);
        if (low >= 0xdc00 && low < 0xe000) {
          cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          p += 6;
        }
      }
      if (cp >= 0xd800 && cp < 0xe000) cp = 0xfffd; // a lone surrogate
      out = putUtf8(out, cp);
    } else {
      let b: u8 = e; // `"`, `\`, `/`
      if (e == 0x62) b = 0x08;
      else if (e == 0x66) b = 0x0c;
      else if (e == 0x6e) b = 0x0a;
      else if (e == 0x72) b = 0x0d;
      else if (e == 0x74) b = 0x09;
      store<u8>(out++, b);
    }
  }
  return String.UTF8.decodeUnsafe(buf, out - buf);
}

function hex4(p: usize): u32 {
  return (
    (<u32>hexValue(load<u8>(p)) << 12) | (<u32>hexValue(load<u8>(p + 1)) << 8) |
    (<u32>hexValue(load<u8>(p + 2)) << 4) | <u32>hexValue(load<u8>(p + 3))
  );
}

function putUtf8(out: usize, cp: u32): usize {
  if (cp < 0x80) {
    store<u8>(out, <u8>cp);
    return out + 1;
  }
  if (cp < 0x800) {
    store<u8>(out, <u8>(0xc0 | (cp >> 6)));
    store<u8>(out + 1, <u8>(0x80 | (cp & 0x3f)));
    return out + 2;
  }
  if (cp < 0x10000) {
    store<u8>(out, <u8>(0xe0 | (cp >> 12)));
    store<u8>(out + 1, <u8>(0x80 | ((cp >> 6) & 0x3f)));
    store<u8>(out + 2, <u8>(0x80 | (cp & 0x3f)));
    return out + 3;
  }
  store<u8>(out, <u8>(0xf0 | (cp >> 18)));
  store<u8>(out + 1, <u8>(0x80 | ((cp >> 12) & 0x3f)));
  store<u8>(out + 2, <u8>(0x80 | ((cp >> 6) & 0x3f)));
  store<u8>(out + 3, <u8>(0x80 | (cp & 0x3f)));
  return out + 4;
}

/** Reads a string, escapes decoded. */
export function readString(r: Reader): string {
  if (r.peek() != QUOTE) {
    r.fail();
    return "";
  }
  const start = r.pos + 1;
  if (!r.scanString()) return "";
  return decodeSpan(start, r.pos - 1, r.lastEscaped);
}

/** Reads a boolean. */
export function readBool(r: Reader): bool {
  const c = r.peek();
  if (c == 0x74 && r.literal("true")) return true;
  if (c == 0x66 && r.literal("false")) return false;
  r.fail();
  return false;
}

/**
 * Reads a number as the nearest double: with Clinger's exact fast path for
 * up to 15 significant digits and powers of ten up to 22 (counts, seconds,
 * most shares), else with atof.ts's slower exact conversion.
 */
export function readF64(r: Reader): f64 {
  const c = r.peek();
  if (c != 0x2d && !(c >= 0x30 && c <= 0x39)) {
    r.fail();
    return 0;
  }
  const start = r.pos;
  if (!r.scanNumber()) return 0;
  const end = r.pos;
  let p = start;
  const negative = load<u8>(p) == 0x2d;
  if (negative) p++;
  let mantissa: u64 = 0;
  let digits = 0;
  let exponent = 0;
  let fraction = false;
  for (; p < end; p++) {
    const d = load<u8>(p);
    if (d == 0x2e) {
      fraction = true;
      continue;
    }
    if (!isDigit(d)) break;
    if (mantissa != 0 || d != 0x30) digits++;
    if (digits > 15) break;
    mantissa = mantissa * 10 + <u64>(d - 0x30);
    if (fraction) exponent--;
  }
  if (digits <= 15) {
    if (p < end) {
      // the exponent part
      p++;
      let sign = 1;
      if (load<u8>(p) == 0x2d) {
        sign = -1;
        p++;
      } else if (load<u8>(p) == 0x2b) {
        p++;
      }
      let e = 0;
      for (; p < end && e < 10000; p++) e = e * 10 + <i32>(load<u8>(p) - 0x30);
      exponent += sign * e;
    }
    if (exponent >= -22 && exponent <= 22) {
      let v = <f64>mantissa;
      v = exponent < 0 ? v / unchecked(POW10[-exponent]) : v * unchecked(POW10[exponent]);
      return negative ? -v : v;
    }
  }
  return parseDecimal(start, end);
}

/** Reads an integer in [-2^63, 2^63); a fraction or exponent fails. */
export function readI64(r: Reader): i64 {
  const c = r.peek();
  if (c != 0x2d && !(c >= 0x30 && c <= 0x39)) {
    r.fail();
    return 0;
  }
  const start = r.pos;
  if (!r.scanNumber()) return 0;
  let p = start;
  const negative = load<u8>(p) == 0x2d;
  if (negative) p++;
  const limit: u64 = negative ? 0x8000000000000000 : 0x7fffffffffffffff;
  let v: u64 = 0;
  for (; p < r.pos; p++) {
    const d = load<u8>(p);
    if (!isDigit(d) || v > (limit - <u64>(d - 0x30)) / 10) {
      r.fail();
      return 0;
    }
    v = v * 10 + <u64>(d - 0x30);
  }
  return negative ? <i64>(0 - v) : <i64>v;
}

/** Reads an integer in [0, 2^32). */
export function readU32(r: Reader): u32 {
  const v = readI64(r);
  if (v < 0 || v > <i64>u32.MAX_VALUE) {
    r.fail();
    return 0;
  }
  return <u32>v;
}

/** Takes any value as it is, as a Json span. */
export function readJson(r: Reader): Json {
  r.peek();
  const start = r.pos;
  r.skip();
  return r.failed ? new Json() : new Json(start, r.pos - start);
}

/** A response being written: a buffer that grows in place (never freed). */
export class Writer {
  ptr: usize;
  len: usize = 0;
  cap: usize = 256;

  constructor() {
    this.ptr = heap.alloc(this.cap);
  }

  private reserve(n: usize): void {
    if (this.len + n <= this.cap) return;
    let cap = this.cap * 2;
    if (cap < this.len + n) cap = this.len + n;
    this.ptr = heap.realloc(this.ptr, cap);
    this.cap = cap;
  }

  /** Appends one byte. */
  byte(b: u8): void {
    this.reserve(1);
    store<u8>(this.ptr + this.len, b);
    this.len++;
  }

  /** Appends an ASCII string as it is (no escaping). */
  ascii(s: string): void {
    const n = <usize>s.length;
    this.reserve(n);
    for (let i: usize = 0; i < n; i++) store<u8>(this.ptr + this.len + i, <u8>s.charCodeAt(<i32>i));
    this.len += n;
  }

  /** Appends len bytes from ptr. */
  bytes(ptr: usize, len: usize): void {
    this.reserve(len);
    memory.copy(this.ptr + this.len, ptr, len);
    this.len += len;
  }

  /** What a hook returns: (ptr << 32) | len of the bytes written. */
  result(): u64 {
    return (<u64>this.ptr << 32) | <u64>this.len;
  }
}

/** Writes a string as JSON (UTF-8, `"`, `\` and control characters escaped). */
export function writeString(w: Writer, s: string): void {
  w.byte(QUOTE);
  const n = s.length;
  for (let i = 0; i < n; i++) {
    let cp = <u32>s.charCodeAt(i);
    if (cp == 0x22 || cp == 0x5c) {
      w.byte(BACKSLASH);
      w.byte(<u8>cp);
    } else if (cp < 0x20) {
      w.ascii("\\u00");
      w.byte(<u8>(cp < 0x10 ? 0x30 : 0x31));
      const low = cp & 0xf;
      w.byte(<u8>(low < 10 ? 0x30 + low : 0x61 + low - 10));
    } else if (cp < 0x80) {
      w.byte(<u8>cp);
    } else {
      if (cp >= 0xd800 && cp < 0xdc00 && i + 1 < n) {
        const low = <u32>s.charCodeAt(i + 1);
        if (low >= 0xdc00 && low < 0xe000) {
          cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          i++;
        }
      }
      if (cp >= 0xd800 && cp < 0xe000) cp = 0xfffd; // a lone surrogate
      const tmp = memory.data(4);
      w.bytes(tmp, putUtf8(tmp, cp) - tmp);
    }
  }
  w.byte(QUOTE);
}

/** Writes a number so it reads back as the same double; NaN and infinities (not JSON) as null. */
export function writeF64(w: Writer, v: f64): void {
  if (!isFinite(v)) w.ascii("null");
  else if (v == 0 && reinterpret<i64>(v) < 0) w.ascii("-0.0");
  else w.ascii(v.toString());
}

/** Writes an integer. */
export function writeI64(w: Writer, v: i64): void {
  w.ascii(v.toString());
}

/** Writes an integer. */
export function writeU32(w: Writer, v: u32): void {
  w.ascii(v.toString());
}

/** Writes true or false. */
export function writeBool(w: Writer, v: bool): void {
  w.ascii(v ? "true" : "false");
}

/** Writes a Json value's text as it is. */
export function writeJson(w: Writer, v: Json): void {
  if (v.len == 0) w.ascii("null");
  else w.bytes(v.ptr, v.len);
}
