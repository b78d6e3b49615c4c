//! ONNX's packing of the sub-byte element types: two 4-bit elements to a byte (INT4, UINT4,
//! FLOAT4E2M1) and four 2-bit elements (INT2, UINT2), the first element in the lowest bits; the
//! unused bits of a last, partly filled byte are zero. In memory the tensor layer holds them a
//! byte per element, signed ones sign-extended.

use crate::konst::elem;

/// Bits per element of a packed element type.
pub fn bits(code: i32) -> Option<u32> {
    match code {
        elem::INT4 | elem::UINT4 | elem::FLOAT4E2M1 => Some(4),
        elem::INT2 | elem::UINT2 => Some(2),
        _ => None,
    }
}

/// The bytes `n` elements of `bits` bits take packed.
pub fn packed_len(n: usize, bits: u32) -> usize {
    (n * bits as usize).div_ceil(8)
}

/// `n` elements a byte each from their packed form (which holds at least `packed_len` bytes).
pub fn unpack(code: i32, packed: &[u8], n: usize) -> Vec<u8> {
    let Some(b) = bits(code) else {
        return packed.to_vec();
    };
    let per = (8 / b) as usize;
    let mask = (1u8 << b) - 1;
    let signed = matches!(code, elem::INT4 | elem::INT2);
    (0..n)
        .map(|i| {
            let v = (packed[i / per] >> ((i % per) as u32 * b)) & mask;
            if signed {
                // Sign-extend from `b` bits.
                (((v << (8 - b)) as i8) >> (8 - b)) as u8
            } else {
                v
            }
        })
        .collect()
}

/// Elements a byte each (as `unpack` gives them) packed; the unused bits are zero.
pub fn pack(code: i32, bytes: &[u8]) -> Vec<u8> {
    let Some(b) = bits(code) else {
        return bytes.to_vec();
    };
    let per = (8 / b) as usize;
    let mask = (1u8 << b) - 1;
    bytes
        .chunks(per)
        .map(|c| {
            c.iter()
                .enumerate()
                .fold(0u8, |acc, (k, &v)| acc | ((v & mask) << (k as u32 * b)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibbles_go_low_first_and_signed_ones_extend() {
        // -1 (0xf) then 7: 0x7f; a fifth 2-bit element starts the second byte.
        assert_eq!(unpack(elem::INT4, &[0x7f], 2), [0xff, 7]);
        assert_eq!(unpack(elem::UINT4, &[0x7f], 2), [15, 7]);
        assert_eq!(pack(elem::INT4, &[0xff, 7, 0xf8]), [0x7f, 0x08]);
        // 0b10_01_00_11: 3, 0, 1, 2 (u2), or -1, 0, 1, -2 (i2).
        assert_eq!(unpack(elem::UINT2, &[0b1001_0011, 1], 5), [3, 0, 1, 2, 1]);
        assert_eq!(unpack(elem::INT2, &[0b1001_0011], 4), [0xff, 0, 1, 0xfe]);
        assert_eq!(pack(elem::INT2, &[0xff, 0, 1, 0xfe, 1]), [0b1001_0011, 1]);
        assert_eq!(packed_len(5, 4), 3);
        assert_eq!(packed_len(5, 2), 2);
    }
}
