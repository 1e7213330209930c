// A correctly rounded decimal-to-double conversion for the numbers the
// reader's exact fast path does not cover (more than 15 significant
// digits, or powers of ten beyond 22): the standard library's parseFloat
// is not correctly rounded (0.28: "1.4863756283822065e51" reads as
// 1.48…e38). This is Go's strconv "decimal" algorithm (atof.go,
// decimal.go): the digits are shifted by powers of two, exactly, until the
// 53-bit mantissa can be read off with round-half-even.

const MAX_DIGITS: i32 = 800;
const MAX_SHIFT: i32 = 60;
const BIAS: i32 = -1023;
const MANT_BITS: u64 = 52;

// The digits, 0-9 (not ASCII), of 0.d[0]d[1]… × 10^dp.
const d = memory.data(MAX_DIGITS);
let nd: i32 = 0;
let dp: i32 = 0;
let trunc = false;

function digit(i: i32): u64 {
  return <u64>load<u8>(d + <usize>i);
}

function setDigit(i: i32, v: u64): void {
  store<u8>(d + <usize>i, <u8>v);
}

function trim(): void {
  while (nd > 0 && digit(nd - 1) == 0) nd--;
  if (nd == 0) dp = 0;
}

function leftShift(k: i32): void {
  // How many digits the product has: a dry run of the loop below.
  let n: u64 = 0;
  for (let r = nd - 1; r >= 0; r--) n = (n + (digit(r) << k)) / 10;
  let delta = 0;
  for (; n > 0; n /= 10) delta++;
  let w = nd + delta;
  n = 0;
  for (let r = nd - 1; r >= 0; r--) {
    n += digit(r) << k;
    const quo = n / 10;
    const rem = n - 10 * quo;
    w--;
    if (w < MAX_DIGITS) setDigit(w, rem);
    else if (rem != 0) trunc = true;
    n = quo;
  }
  while (n > 0) {
    const quo = n / 10;
    const rem = n - 10 * quo;
    w--;
    if (w < MAX_DIGITS) setDigit(w, rem);
    else if (rem != 0) trunc = true;
    n = quo;
  }
  nd += delta;
  if (nd >= MAX_DIGITS) nd = MAX_DIGITS;
  dp += delta;
  trim();
}

function rightShift(k: i32): void {
  let r = 0;
  let w = 0;
  let n: u64 = 0;
  for (; n >> k == 0; r++) {
    if (r >= nd) {
      if (n == 0) {
        nd = 0;
        return;
      }
      while (n >> k == 0) {
        n *= 10;
        r++;
      }
      break;
    }
    n = n * 10 + digit(r);
  }
  dp -= r - 1;
  const mask: u64 = (<u64>1 << k) - 1;
  for (; r < nd; r++) {
    const c = digit(r);
    setDigit(w++, n >> k);
    n &= mask;
    n = n * 10 + c;
  }
  while (n > 0) {
    const dig = n >> k;
    n &= mask;
    if (w < MAX_DIGITS) setDigit(w++, dig);
    else if (dig > 0) trunc = true;
    n *= 10;
  }
  nd = w;
  trim();
}

function shift(k: i32): void {
  if (nd == 0) return;
  if (k > 0) {
    for (; k > MAX_SHIFT; k -= MAX_SHIFT) leftShift(MAX_SHIFT);
    leftShift(k);
  } else if (k < 0) {
    for (; k < -MAX_SHIFT; k += MAX_SHIFT) rightShift(MAX_SHIFT);
    rightShift(-k);
  }
}

function shouldRoundUp(at: i32): bool {
  if (at < 0 || at >= nd) return false;
  if (digit(at) == 5 && at + 1 == nd) {
    // exactly halfway: round to even
    if (trunc) return true;
    return at > 0 && digit(at - 1) % 2 == 1;
  }
  return digit(at) >= 5;
}

function roundedInteger(): u64 {
  if (dp > 20) return u64.MAX_VALUE;
  let n: u64 = 0;
  let i = 0;
  for (; i < dp && i < nd; i++) n = n * 10 + digit(i);
  for (; i < dp; i++) n *= 10;
  if (shouldRoundUp(dp)) n++;
  return n;
}

// How far to shift to move the decimal point by powers of ten.
const POWTAB: i32[] = [1, 3, 6, 9, 13, 16, 19, 23, 26];

function powtab(i: i32): i32 {
  return i >= POWTAB.length ? 27 : unchecked(POWTAB[i]);
}

/** The double nearest to the JSON number start..end (well-formed, as scanNumber checked). */
export function parseDecimal(start: usize, end: usize): f64 {
  nd = 0;
  dp = 0;
  trunc = false;
  let p = start;
  const negative = load<u8>(p) == 0x2d;
  if (negative) p++;
  let sawDot = false;
  for (; p < end; p++) {
    const c = load<u8>(p);
    if (c == 0x2e) {
      sawDot = true;
      dp = nd;
      continue;
    }
    if (c < 0x30 || c > 0x39) break;
    if (c == 0x30 && nd == 0) {
      dp--; // a leading zero
      continue;
    }
    if (nd < MAX_DIGITS) setDigit(nd++, <u64>(c - 0x30));
    else if (c != 0x30) trunc = true;
  }
  if (!sawDot) dp = nd;
  if (p < end) {
    p++; // the exponent's `e`
    let sign = 1;
    if (load<u8>(p) == 0x2b) p++;
    else if (load<u8>(p) == 0x2d) {
      sign = -1;
      p++;
    }
    let e = 0;
    for (; p < end; p++) if (e < 10000) e = e * 10 + <i32>(load<u8>(p) - 0x30);
    dp += e * sign;
  }

  let exp = 0;
  let mant: u64 = 0;
  let overflow = false;
  if (nd == 0 || dp < -330) {
    exp = BIAS;
  } else if (dp > 310) {
    overflow = true;
  } else {
    while (dp > 0) {
      const n = powtab(dp);
      shift(-n);
      exp += n;
    }
    while (dp < 0 || (dp == 0 && digit(0) < 5)) {
      const n = powtab(-dp);
      shift(n);
      exp -= n;
    }
    exp--; // from [0.5, 1) to [1, 2)
    if (exp < BIAS + 1) {
      const n = BIAS + 1 - exp;
      shift(-n);
      exp += n;
    }
    if (exp - BIAS >= 0x7ff) {
      overflow = true;
    } else {
      shift(1 + <i32>MANT_BITS);
      mant = roundedInteger();
      if (mant == <u64>2 << MANT_BITS) {
        mant >>= 1;
        exp++;
        if (exp - BIAS >= 0x7ff) overflow = true;
      }
      if ((mant & (<u64>1 << MANT_BITS)) == 0) exp = BIAS;
    }
  }
  if (overflow) {
    mant = 0;
    exp = 0x7ff + BIAS;
  }
  let bits = mant & ((<u64>1 << MANT_BITS) - 1);
  bits |= <u64>((exp - BIAS) & 0x7ff) << MANT_BITS;
  if (negative) bits |= <u64>1 << 63;
  return reinterpret<f64>(bits);
}
