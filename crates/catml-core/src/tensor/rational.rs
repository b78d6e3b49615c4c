use num_traits::{FromPrimitive, ToPrimitive};

use super::Array;

/// Arbitrary-precision rationals, the exact oracle's numbers.
pub type Rational = num_rational::BigRational;

/// An array of exact rationals.
pub type RArray = Array<Rational>;

/// The exact rational value of a finite float (every finite binary float is rational).
pub fn rational_from_f64(x: f64) -> Option<Rational> {
    Rational::from_f64(x)
}

/// The nearest f64 to a rational (infinite if out of range).
pub fn rational_to_f64(r: &Rational) -> f64 {
    r.to_f64().unwrap_or(f64::NAN)
}
