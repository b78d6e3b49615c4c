//! E8M0 (`docs/dtypes.md`), the scale format of the OCP microscaling formats: eight exponent
//! bits and nothing else. The pattern c is 2^(c - 127) for c < 255, and 255 is NaN; there is no
//! zero, no sign and no infinity.

/// The NaN pattern.
pub(crate) const NAN: u8 = 0xff;

/// The largest value, 2^127.
pub(crate) fn max() -> f64 {
    2f64.powi(127)
}

/// The value of a pattern.
pub(crate) fn decode(code: u8) -> f64 {
    if code == NAN {
        f64::NAN
    } else {
        2f64.powi(i32::from(code) - 127)
    }
}

/// The least power of two not below |x| (rounding up, the format's rule), at least 2^-127; NaN,
/// the infinities and magnitudes beyond 2^127 are NaN.
pub(crate) fn encode(x: f64) -> u8 {
    let a = x.abs();
    if !a.is_finite() || a > max() {
        return NAN;
    }
    if a <= 2f64.powi(-127) {
        return 0;
    }
    // a is a normal f64 here: its biased exponent, plus one if it has fraction bits.
    let bits = a.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i32 - 1023;
    let up = i32::from(bits & ((1u64 << 52) - 1) != 0);
    (e + up + 127) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_decodes_and_encodes_back() {
        for code in 0..=255u8 {
            let v = decode(code);
            if code == NAN {
                assert!(v.is_nan());
                assert_eq!(encode(v), NAN);
            } else {
                assert_eq!(v, 2f64.powi(i32::from(code) - 127));
                assert_eq!(encode(v), code, "{code}");
            }
        }
    }

    #[test]
    fn values_round_up_to_a_power_of_two() {
        // 1.1 lies between 1 (127) and 2 (128): up is 2; 0.124 rounds up to 0.125 = 2^-3.
        assert_eq!(encode(1.1), 128);
        assert_eq!(encode(0.124), 124);
        assert_eq!(encode(1.0 + f64::EPSILON), 128);
        assert_eq!(encode(2.0), 128);
        // Zero and anything at or below 2^-127 take the smallest pattern.
        assert_eq!(encode(0.0), 0);
        assert_eq!(encode(1e-300), 0);
        assert_eq!(encode(1.5 * 2f64.powi(-127)), 1);
        // The sign is dropped; beyond 2^127 (rounding up past it) and infinities are NaN.
        assert_eq!(encode(-4.0), 129);
        assert_eq!(encode(2f64.powi(127)), 254);
        assert_eq!(encode(2f64.powi(127) * 1.5), NAN);
        assert_eq!(encode(f64::INFINITY), NAN);
        assert_eq!(encode(f64::NAN), NAN);
    }
}
