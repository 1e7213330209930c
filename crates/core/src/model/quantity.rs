//! Exact Kubernetes quantities (`500m`, `32Gi`, `1.5`, `2e3`, `1k`).
//!
//! Manifests carry k8s-openapi's [`Quantity`] (a string, as the API server
//! stores it); this module turns one into an [`Amount`], an integer count of
//! milli-units, without ever going through floating point. Every resource in
//! Arbiter — CPU, memory, GPUs, any extended resource — is an `Amount`.
//! Fractions finer than a milli-unit round up, as Kubernetes' `MilliValue`
//! does. Pure: no I/O; called by the model loader at the input boundary.

use std::fmt;
use std::ops::{Add, AddAssign, Neg, Sub, SubAssign};

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

/// An exact amount of one resource, in milli-units (`1` CPU = `Amount(1000)`,
/// `1Ki` of memory = `Amount(1_024_000)`, one GPU = `Amount(1000)`).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Amount(i64);

/// Why a quantity string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The quantity string is empty.
    #[error("empty quantity")]
    Empty,
    #[error(
        "`{0}` is not a Kubernetes quantity (expected e.g. `500m`, `2`, `1.5`, `32Gi`, `2e3`)"
    )]
    /// Not Kubernetes quantity syntax.
    Syntax(String),
    /// Too large to represent.
    #[error("`{0}` is too large (at most about 9.2e15 units)")]
    Overflow(String),
}

impl Amount {
    /// Nothing.
    pub const ZERO: Amount = Amount(0);
    /// The largest representable amount; used as "no limit".
    pub const MAX: Amount = Amount(i64::MAX);

    /// `milli` thousandths of a unit.
    pub const fn from_milli(milli: i64) -> Amount {
        Amount(milli)
    }
    /// `units` whole units (one CPU, one GPU, one byte).
    pub const fn from_units(units: i64) -> Amount {
        Amount(units.saturating_mul(1000))
    }
    /// In thousandths of a unit.
    pub const fn milli(self) -> i64 {
        self.0
    }
    /// In units, as a float.
    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }
    /// Is it zero?
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
    /// Is it below zero?
    pub fn is_negative(self) -> bool {
        self.0 < 0
    }
    /// `self + other`, saturating.
    pub fn saturating_add(self, other: Amount) -> Amount {
        Amount(self.0.saturating_add(other.0))
    }
    /// `self - other`, saturating.
    pub fn saturating_sub(self, other: Amount) -> Amount {
        Amount(self.0.saturating_sub(other.0))
    }
    /// `self × factor`, saturating.
    pub fn saturating_mul(self, factor: i64) -> Amount {
        Amount(self.0.saturating_mul(factor))
    }
    /// `max(self - other, 0)`.
    pub fn positive_sub(self, other: Amount) -> Amount {
        Amount(self.0.saturating_sub(other.0).max(0))
    }

    /// Parses a Kubernetes quantity string exactly.
    pub fn parse(text: &str) -> Result<Amount, QuantityError> {
        parse_milli(text).map(Amount)
    }

    /// Converts k8s-openapi's quantity.
    pub fn from_quantity(quantity: &Quantity) -> Result<Amount, QuantityError> {
        Amount::parse(&quantity.0)
    }

    /// The canonical Kubernetes spelling of this amount: whole numbers plain,
    /// binary suffixes for large multiples of 1024, `m` otherwise.
    pub fn to_quantity_string(self) -> String {
        let milli = self.0;
        if milli % 1000 != 0 {
            return format!("{milli}m");
        }
        let units = milli / 1000;
        const BINARY: [(&str, i64); 5] = [
            ("Pi", 1 << 50),
            ("Ti", 1 << 40),
            ("Gi", 1 << 30),
            ("Mi", 1 << 20),
            ("Ki", 1 << 10),
        ];
        if units.abs() >= 1 << 20 {
            for (suffix, factor) in BINARY {
                if units % factor == 0 {
                    return format!("{}{suffix}", units / factor);
                }
            }
        }
        units.to_string()
    }

    /// As a Kubernetes `Quantity` (canonical form).
    pub fn to_quantity(self) -> Quantity {
        Quantity(self.to_quantity_string())
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_quantity_string())
    }
}

impl Add for Amount {
    type Output = Amount;
    fn add(self, rhs: Amount) -> Amount {
        self.saturating_add(rhs)
    }
}
impl AddAssign for Amount {
    fn add_assign(&mut self, rhs: Amount) {
        *self = self.saturating_add(rhs);
    }
}
impl Sub for Amount {
    type Output = Amount;
    fn sub(self, rhs: Amount) -> Amount {
        self.saturating_sub(rhs)
    }
}
impl SubAssign for Amount {
    fn sub_assign(&mut self, rhs: Amount) {
        *self = self.saturating_sub(rhs);
    }
}
impl Neg for Amount {
    type Output = Amount;
    fn neg(self) -> Amount {
        Amount(self.0.saturating_neg())
    }
}
impl std::iter::Sum for Amount {
    fn sum<I: Iterator<Item = Amount>>(iter: I) -> Amount {
        iter.fold(Amount::ZERO, Amount::saturating_add)
    }
}

/// Longest mantissa accepted (digits); keeps the exact arithmetic in `i128`.
const MAX_DIGITS: usize = 24;
/// Largest decimal exponent magnitude accepted.
const MAX_EXPONENT: i32 = 30;

fn parse_milli(text: &str) -> Result<i64, QuantityError> {
    let syntax = || QuantityError::Syntax(text.to_string());
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(QuantityError::Empty);
    }
    let (negative, rest) = match trimmed.as_bytes()[0] {
        b'-' => (true, &trimmed[1..]),
        b'+' => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_end);
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return Err(syntax());
    }
    let digits: String = format!("{int_part}{frac_part}");
    let significant = digits.trim_start_matches('0');
    if significant.len() > MAX_DIGITS {
        return Err(QuantityError::Overflow(text.to_string()));
    }
    let mantissa: i128 = if significant.is_empty() {
        0
    } else {
        significant.parse().map_err(|_| syntax())?
    };
    // value = mantissa * 10^(exp10 - frac_digits) * 2^exp2
    let mut exp10: i32 = -(frac_part.len() as i32);
    let mut exp2: u32 = 0;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => exp2 = 10,
        "Mi" => exp2 = 20,
        "Gi" => exp2 = 30,
        "Ti" => exp2 = 40,
        "Pi" => exp2 = 50,
        "Ei" => exp2 = 60,
        s if s.starts_with(['e', 'E']) => {
            let exponent: i32 = s[1..]
                .parse()
                .ok()
                .filter(|e: &i32| e.abs() <= MAX_EXPONENT)
                .ok_or_else(syntax)?;
            exp10 += exponent;
        }
        _ => return Err(syntax()),
    }
    // milli-units: one more factor of 10^3.
    exp10 += 3;
    let overflow = || QuantityError::Overflow(text.to_string());
    let mut value = mantissa.checked_mul(1i128 << exp2).ok_or_else(overflow)?;
    if exp10 >= 0 {
        let factor = 10i128.checked_pow(exp10 as u32).ok_or_else(overflow)?;
        value = value.checked_mul(factor).ok_or_else(overflow)?;
    } else {
        let divisor = 10i128.checked_pow((-exp10) as u32).ok_or_else(overflow)?;
        // Round up: fractions of a milli-unit count as one, like MilliValue.
        value = (value + divisor - 1) / divisor;
    }
    let signed = if negative { -value } else { value };
    i64::try_from(signed).map_err(|_| overflow())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn milli(s: &str) -> i64 {
        Amount::parse(s).unwrap().milli()
    }

    #[test]
    fn parses_the_kubernetes_forms_exactly() {
        assert_eq!(milli("500m"), 500);
        assert_eq!(milli("1"), 1000);
        assert_eq!(milli("1.5"), 1500);
        assert_eq!(milli("2e3"), 2_000_000);
        assert_eq!(milli("2E3"), 2_000_000);
        assert_eq!(milli("1k"), 1_000_000);
        assert_eq!(milli("32Gi"), 32 * (1 << 30) * 1000);
        assert_eq!(milli("1Ti"), (1i64 << 40) * 1000);
        assert_eq!(milli(".5"), 500);
        assert_eq!(milli("5."), 5000);
        assert_eq!(milli("0.1Gi"), 107_374_182_400);
        assert_eq!(milli("-3"), -3000);
        assert_eq!(milli("+3"), 3000);
        assert_eq!(milli("1e-3"), 1);
        assert_eq!(milli("100M"), 100_000_000_000);
        assert_eq!(milli("0"), 0);
        assert_eq!(milli("000001"), 1000);
    }

    #[test]
    fn sub_milli_fractions_round_up() {
        assert_eq!(milli("1u"), 1);
        assert_eq!(milli("1n"), 1);
        assert_eq!(milli("1500u"), 2);
        assert_eq!(milli("0.0001"), 1);
    }

    #[test]
    fn rejects_what_kubernetes_rejects() {
        for bad in [
            "", "abc", "1.2.3", "1Qi", "1 Gi", "1e", "1e+", "Gi", ".", "--1", "1ki", "1e99",
        ] {
            assert!(Amount::parse(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn overflow_is_an_error_not_a_wrap() {
        assert!(matches!(
            Amount::parse("100Ei"),
            Err(QuantityError::Overflow(_))
        ));
        assert!(matches!(
            Amount::parse("99999999999999999999999999999"),
            Err(QuantityError::Overflow(_))
        ));
    }

    #[test]
    fn prints_canonically() {
        assert_eq!(Amount::parse("32Gi").unwrap().to_string(), "32Gi");
        assert_eq!(Amount::parse("500m").unwrap().to_string(), "500m");
        assert_eq!(Amount::parse("8").unwrap().to_string(), "8");
        assert_eq!(Amount::parse("1k").unwrap().to_string(), "1000");
    }
}
