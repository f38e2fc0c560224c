//! Byte sizes: an integer number of bytes, or a string with a binary suffix.
//!
//! `4096`, `"4096"`, `"512K"`, `"512M"`, `"1G"`, `"2T"`: the suffixes are
//! powers of 1024 (K = 2^10 ... T = 2^40) and may be written in either case,
//! optionally followed by `iB` (`"1GiB"`). Fractions, negative numbers, white
//! space inside the number and values above `u64::MAX` are refused, each with
//! a message naming the input.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// Why a size string could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Not `<digits>[K|M|G|T][iB]`.
    #[error(
        "{0:?} is not a size: use bytes (4096) or a number with a K, M, G or T suffix (\"512M\")"
    )]
    Syntax(String),
    /// Larger than 2^64 - 1 bytes.
    #[error("{0:?} is too large")]
    Overflow(String),
    /// A negative integer.
    #[error("{0} is negative; sizes are byte counts")]
    Negative(i64),
}

/// Parses a size string (see the module docs).
pub fn parse_size(input: &str) -> Result<u64, SizeError> {
    let syntax = || SizeError::Syntax(input.to_string());
    let s = input.trim();
    let digits_end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, suffix) = s.split_at(digits_end);
    if digits.is_empty() {
        return Err(syntax());
    }
    let shift = match suffix {
        "" | "B" | "b" => 0,
        _ => {
            let mut chars = suffix.chars();
            let unit = chars.next().ok_or_else(syntax)?;
            let rest = chars.as_str();
            if !matches!(rest, "" | "iB" | "ib" | "B" | "b") {
                return Err(syntax());
            }
            match unit.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(syntax()),
            }
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| SizeError::Overflow(input.to_string()))?;
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| SizeError::Overflow(input.to_string()))
}

/// Prints `bytes` with the largest binary suffix that divides it exactly
/// (`1073741824` -> `1G`); sizes no suffix divides stay plain bytes
/// (`1536` -> `1536`). The output parses back with [`parse_size`].
pub fn format_size(bytes: u64) -> String {
    for (shift, suffix) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        let unit = 1u64 << shift;
        if bytes >= unit && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// A size read from the config: an integer or a suffixed string.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size: bytes as an integer, or a string like \"512M\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Size, E> {
                u64::try_from(v)
                    .map(Size)
                    .map_err(|_| E::custom(SizeError::Negative(v)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Size, E> {
                Ok(Size(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Size, E> {
                parse_size(v).map(Size).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        for (input, want) in [
            ("0", 0),
            ("4096", 4096),
            ("512K", 512 << 10),
            ("512M", 512 << 20),
            ("1G", 1 << 30),
            ("1g", 1 << 30),
            ("1GiB", 1 << 30),
            ("3T", 3 << 40),
            ("100B", 100),
            (" 2M ", 2 << 20),
        ] {
            assert_eq!(parse_size(input), Ok(want), "{input:?}");
        }
    }

    #[test]
    fn refuses_bad_sizes() {
        for bad in [
            "", "M", "1.5G", "-1", "1X", "1 G", "1GG", "1Gi", "0x10", "G1",
        ] {
            assert!(
                matches!(parse_size(bad), Err(SizeError::Syntax(_))),
                "{bad:?}: {:?}",
                parse_size(bad)
            );
        }
        assert!(matches!(
            parse_size("17179869184G"),
            Err(SizeError::Overflow(_))
        ));
        assert!(matches!(
            parse_size("99999999999999999999"),
            Err(SizeError::Overflow(_))
        ));
    }

    #[test]
    fn formats_with_the_largest_exact_suffix() {
        for (bytes, want) in [
            (0, "0"),
            (1536, "1536"),
            (2048, "2K"),
            (512 << 20, "512M"),
            (1 << 30, "1G"),
            (3 << 40, "3T"),
            ((1 << 30) + 1, "1073741825"),
        ] {
            assert_eq!(format_size(bytes), want);
            assert_eq!(parse_size(want), Ok(bytes));
        }
    }
}
