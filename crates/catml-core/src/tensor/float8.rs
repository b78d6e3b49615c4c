//! The 8-bit float formats (`docs/dtypes.md`): one sign bit, `e` exponent bits, `m` fraction
//! bits. E5M2 follows IEEE 754 (infinities, NaNs with the exponent all ones); E4M3FN has no
//! infinities and one NaN pattern per sign (all ones); the FNUZ formats have no infinities, no
//! negative zero, and one NaN, the pattern of negative zero (0x80). The 4-bit E2M1 has
//! neither infinities nor NaN: its patterns are the low nibble of a byte.

use super::DType;

/// How a format spends its special patterns.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Specials {
    /// Infinities and NaNs at the largest exponent, as IEEE 754.
    Ieee,
    /// NaN is S.1111.111; no infinities.
    FiniteNan,
    /// NaN is 0x80; no infinities, no negative zero.
    Unsigned,
    /// Every pattern is finite: values beyond the largest become it, and NaN becomes 0.
    Finite,
}

/// An 8-bit float format.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Format {
    /// The sign bit; the magnitude's bits are below it.
    sign: u8,
    m: u32,
    bias: i32,
    specials: Specials,
    /// The largest finite magnitude's pattern (sign bit clear).
    max_code: u8,
}

impl Format {
    pub(crate) fn of(d: DType) -> Option<Format> {
        let (sign, m, bias, specials, max_code) = match d {
            DType::F8E4M3FN => (0x80, 3, 7, Specials::FiniteNan, 0x7e),
            DType::F8E4M3FNUZ => (0x80, 3, 8, Specials::Unsigned, 0x7f),
            DType::F8E5M2 => (0x80, 2, 15, Specials::Ieee, 0x7b),
            DType::F8E5M2FNUZ => (0x80, 2, 16, Specials::Unsigned, 0x7f),
            DType::F4E2M1 => (0x08, 1, 1, Specials::Finite, 0x07),
            _ => return None,
        };
        Some(Format {
            sign,
            m,
            bias,
            specials,
            max_code,
        })
    }

    fn nan(self) -> u8 {
        match self.specials {
            Specials::Ieee => 0x7e,
            Specials::FiniteNan => 0x7f,
            Specials::Unsigned => 0x80,
            Specials::Finite => 0,
        }
    }

    /// The number of patterns (256 or 16).
    #[cfg(test)]
    fn patterns(self) -> u32 {
        u32::from(self.sign) << 1
    }

    /// The magnitude of a pattern with the sign bit clear.
    fn magnitude(self, code: u8) -> f64 {
        let e = i32::from(code >> self.m);
        let f = f64::from(code & ((1 << self.m) - 1));
        let scale = f64::from(1u32 << self.m);
        if e == 0 {
            f / scale * 2f64.powi(1 - self.bias)
        } else {
            (1.0 + f / scale) * 2f64.powi(e - self.bias)
        }
    }

    /// The largest finite value.
    pub(crate) fn max(self) -> f64 {
        self.magnitude(self.max_code)
    }

    /// The value of a pattern.
    pub(crate) fn decode(self, code: u8) -> f64 {
        let neg = code & self.sign != 0;
        let mag = code & (self.sign - 1);
        let nan = match self.specials {
            Specials::Unsigned => code == 0x80,
            Specials::FiniteNan => mag == 0x7f,
            Specials::Ieee => mag > 0x7c,
            Specials::Finite => false,
        };
        if nan {
            return f64::NAN;
        }
        let v = if self.specials == Specials::Ieee && mag == 0x7c {
            f64::INFINITY
        } else {
            self.magnitude(mag)
        };
        if neg {
            -v
        } else {
            v
        }
    }

    /// The pattern nearest `x` (ties to even). Beyond the largest finite value: an infinity
    /// where the format has one, else NaN, else (E2M1) the largest value of its sign.
    pub(crate) fn encode(self, x: f64) -> u8 {
        if x.is_nan() {
            return self.nan();
        }
        let sign = if x.is_sign_negative() { self.sign } else { 0 };
        let a = x.abs();
        let overflow = || match self.specials {
            Specials::Ieee => sign | 0x7c,
            Specials::Finite => sign | self.max_code,
            _ => self.nan(),
        };
        if a.is_infinite() {
            return overflow();
        }
        let scale = f64::from(1u32 << self.m);
        // The exponent of the binade holding a (subnormals share the smallest one).
        let mut e = (a.log2().floor() as i32).max(1 - self.bias);
        while e > 1 - self.bias && 2f64.powi(e) > a {
            e -= 1;
        }
        while 2f64.powi(e + 1) <= a {
            e += 1;
        }
        let biased = e + self.bias;
        if biased > i32::from(self.sign - 1) >> self.m {
            return overflow();
        }
        // Fraction steps of the binade, rounded to nearest even; a carry moves to the next
        // binade, which the code's arithmetic does by itself.
        let steps = (a / 2f64.powi(e) * scale).round_ties_even() as u32;
        let code = if 2f64.powi(e) > a {
            // Subnormal: a / 2^(1 - bias) in units of 2^-m, with a zero exponent field.
            steps
        } else {
            ((biased as u32) << self.m) + steps - (1 << self.m)
        };
        if code > u32::from(self.max_code) {
            return overflow();
        }
        if code == 0 && self.specials == Specials::Unsigned {
            return 0;
        }
        sign | code as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(d: DType) -> Format {
        Format::of(d).unwrap()
    }

    #[test]
    fn every_pattern_decodes_and_encodes_back() {
        for d in [
            DType::F8E4M3FN,
            DType::F8E4M3FNUZ,
            DType::F8E5M2,
            DType::F8E5M2FNUZ,
            DType::F4E2M1,
        ] {
            let fmt = f(d);
            for code in (0..fmt.patterns()).map(|c| c as u8) {
                let v = fmt.decode(code);
                if v.is_nan() {
                    assert!(fmt.decode(fmt.encode(v)).is_nan());
                } else if !(v == 0.0 && code == 0x80) {
                    assert_eq!(fmt.encode(v), code, "{d:?} {code:#x} = {v}");
                }
            }
        }
    }

    #[test]
    fn largest_values_and_overflow_follow_each_format() {
        assert_eq!(f(DType::F8E4M3FN).max(), 448.0);
        assert_eq!(f(DType::F8E4M3FNUZ).max(), 240.0);
        assert_eq!(f(DType::F8E5M2).max(), 57344.0);
        assert_eq!(f(DType::F8E5M2FNUZ).max(), 57344.0);
        // 464 is halfway between 448 (fraction 110b) and 480 (111b, E4M3FN's NaN): ties to
        // even give 448; 500 is past the largest value, and the format has no infinity.
        assert_eq!(f(DType::F8E4M3FN).encode(464.0), 0x7e);
        assert!(f(DType::F8E4M3FN)
            .decode(f(DType::F8E4M3FN).encode(500.0))
            .is_nan());
        assert_eq!(
            f(DType::F8E5M2).decode(f(DType::F8E5M2).encode(1e6)),
            f64::INFINITY
        );
        assert_eq!(f(DType::F8E5M2).encode(-1e6), 0xfc);
        assert_eq!(f(DType::F8E4M3FNUZ).encode(-0.0), 0);
        assert_eq!(f(DType::F8E4M3FN).encode(-0.0), 0x80);
        // 0.3 lies between 0.3125 (0x2a) and 0.28125; the nearest is 0.3125.
        assert_eq!(f(DType::F8E4M3FN).encode(0.3), 0x2a);
        // The smallest subnormal of E4M3FN is 2^-9; half of it rounds to even, zero.
        assert_eq!(f(DType::F8E4M3FN).encode(2f64.powi(-10)), 0);
        assert_eq!(f(DType::F8E4M3FN).encode(1.5 * 2f64.powi(-9)), 2);
    }

    #[test]
    fn e2m1_holds_eight_magnitudes_and_saturates() {
        let e = f(DType::F4E2M1);
        let values: Vec<f64> = (0..16).map(|c| e.decode(c)).collect();
        assert_eq!(
            values,
            [
                0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0,
                -6.0
            ]
        );
        assert!(values[8].is_sign_negative());
        // Ties to even: 0.25 between 0 and 0.5 is 0; 0.75 is 1.0 (pattern 2); 2.5 is 2;
        // 3.5 is 4; 5 is 4 (pattern 6, even).
        assert_eq!(e.encode(0.25), 0);
        assert_eq!(e.encode(0.75), 2);
        assert_eq!(e.encode(2.5), 4);
        assert_eq!(e.encode(3.5), 6);
        assert_eq!(e.encode(5.0), 6);
        assert_eq!(e.encode(-0.0), 8);
        // No infinity, no NaN: past 6 (7 ties to the missing 8) is 6; NaN is 0.
        assert_eq!(e.encode(6.9), 7);
        assert_eq!(e.encode(7.0), 7);
        assert_eq!(e.encode(-1e6), 15);
        assert_eq!(e.encode(f64::INFINITY), 7);
        assert_eq!(e.encode(f64::NAN), 0);
    }
}
