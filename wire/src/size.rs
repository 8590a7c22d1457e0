//! Sizes of the call's own file systems (`sandbox.tmp_size`, `sandbox.shm_size`, and the
//! launcher's plan): a number of bytes with an optional binary suffix (`512M`, `2G`), or a
//! percentage of the machine's memory (`25%`), resolved when the call starts.

use std::fmt;

/// The smallest size accepted: a tmpfs smaller than this breaks ordinary tools.
pub const MIN_BYTES: u64 = 1 << 20;

/// A size as the config writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// This many bytes.
    Bytes(u64),
    /// This percentage (1 to 100) of the machine's memory.
    Percent(u8),
}

/// Why a size was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Not a size such as `512M`, `2G` or `25%`.
    #[error("{0:?}: expected a size such as 512M, 2G or 25% (of the memory)")]
    Syntax(String),
    /// A percentage that is not a whole number from 1 to 100.
    #[error("{0:?}: a percentage of the memory from 1% to 100%")]
    Percent(String),
    /// Less than [`MIN_BYTES`] (1 MiB).
    #[error("{0:?}: at least 1M")]
    TooSmall(String),
    /// More bytes than a `u64` holds.
    #[error("{0:?}: too large")]
    TooLarge(String),
}

impl Size {
    /// Reads `512M`, `2G`, `1048576`, `64k`, `25%` (suffixes K, M, G, T: powers of 1024,
    /// either case, an optional `B` or `iB` after them).
    pub fn parse(text: &str) -> Result<Size, SizeError> {
        let t = text.trim();
        if let Some(p) = t.strip_suffix('%') {
            let n: u8 = p
                .trim()
                .parse()
                .map_err(|_| SizeError::Percent(text.into()))?;
            if !(1..=100).contains(&n) {
                return Err(SizeError::Percent(text.into()));
            }
            return Ok(Size::Percent(n));
        }
        let lower = t.to_ascii_lowercase();
        let body = lower
            .strip_suffix("ib")
            .or_else(|| lower.strip_suffix('b'))
            .unwrap_or(&lower);
        let (digits, shift) = match body.chars().last() {
            Some('k') => (&body[..body.len() - 1], 10),
            Some('m') => (&body[..body.len() - 1], 20),
            Some('g') => (&body[..body.len() - 1], 30),
            Some('t') => (&body[..body.len() - 1], 40),
            _ => (body, 0),
        };
        let digits = digits.trim();
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(SizeError::Syntax(text.into()));
        }
        let n: u64 = digits
            .parse()
            .map_err(|_| SizeError::TooLarge(text.into()))?;
        let bytes = n
            .checked_mul(1u64 << shift)
            .ok_or_else(|| SizeError::TooLarge(text.into()))?;
        if bytes < MIN_BYTES {
            return Err(SizeError::TooSmall(text.into()));
        }
        Ok(Size::Bytes(bytes))
    }

    /// The bytes on a machine with `memory` bytes of memory (a percentage rounded down to
    /// whole pages, never below [`MIN_BYTES`]).
    pub fn bytes(self, memory: u64) -> u64 {
        match self {
            Size::Bytes(b) => b,
            Size::Percent(p) => (memory / 4096 * u64::from(p) / 100 * 4096).max(MIN_BYTES),
        }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Size::Percent(p) => write!(f, "{p}%"),
            Size::Bytes(b) => {
                for (shift, s) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
                    if b % (1u64 << shift) == 0 {
                        return write!(f, "{}{s}", b >> shift);
                    }
                }
                write!(f, "{b}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(Size::parse("512M"), Ok(Size::Bytes(512 << 20)));
        assert_eq!(Size::parse("2g"), Ok(Size::Bytes(2 << 30)));
        assert_eq!(Size::parse("2GiB"), Ok(Size::Bytes(2 << 30)));
        assert_eq!(Size::parse("1048576"), Ok(Size::Bytes(1 << 20)));
        assert_eq!(Size::parse("25%"), Ok(Size::Percent(25)));
        for bad in ["", "x", "-1G", "1.5G", "0%", "101%", "%", "G", "12Q"] {
            assert!(Size::parse(bad).is_err(), "{bad}");
        }
        assert!(matches!(Size::parse("64k"), Err(SizeError::TooSmall(_))));
        assert!(matches!(
            Size::parse("99999999999T"),
            Err(SizeError::TooLarge(_))
        ));
        assert_eq!(Size::Percent(25).bytes(8 << 30), 2 << 30);
        assert_eq!(Size::Percent(1).bytes(1 << 20), MIN_BYTES);
        for s in ["512M", "2G", "25%", "1048577"] {
            assert_eq!(Size::parse(s).unwrap().to_string(), s);
        }
    }
}
