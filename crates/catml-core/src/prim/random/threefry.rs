//! The Threefry-2x32 block cipher with 20 rounds (Salmon et al., "Parallel random numbers: as
//! easy as 1, 2, 3", 2011), the counter-based generator JAX uses, and the key representation
//! every random primitive reads (`docs/random.md`).
//!
//! A key is an `i64[2]` tensor holding two 32-bit words (k0, k1), each in 0..2^32. Element i
//! (row-major) of a draw is the encryption of the 64-bit counter i, split into its high and low
//! words, under the key, so a value depends only on (key, i): the same on every run and at
//! every thread count.

use crate::ir::KernelError;
use crate::tensor::{Array, RArray, Tensor};

/// The rotation distances of Threefry-2x32, cycled every 8 rounds.
const ROTATIONS: [u32; 8] = [13, 15, 26, 6, 17, 29, 16, 24];

/// The key-schedule parity constant of Threefish/Threefry for 32-bit words.
const PARITY: u32 = 0x1BD1_1BDA;

/// Threefry-2x32-20: the counter (c0, c1) encrypted under the key (k0, k1).
pub fn threefry2x32(key: [u32; 2], counter: [u32; 2]) -> [u32; 2] {
    let ks = [key[0], key[1], key[0] ^ key[1] ^ PARITY];
    let mut x = [
        counter[0].wrapping_add(ks[0]),
        counter[1].wrapping_add(ks[1]),
    ];
    for r in 0..20 {
        x[0] = x[0].wrapping_add(x[1]);
        x[1] = x[1].rotate_left(ROTATIONS[r % 8]) ^ x[0];
        if r % 4 == 3 {
            // Key injection n after every four rounds.
            let n = r / 4 + 1;
            x[0] = x[0].wrapping_add(ks[n % 3]);
            x[1] = x[1].wrapping_add(ks[(n + 1) % 3]).wrapping_add(n as u32);
        }
    }
    x
}

/// The two words of block i: the counter i split into (high, low) 32-bit words, encrypted.
pub fn block(key: [u32; 2], i: u64) -> [u32; 2] {
    threefry2x32(key, [(i >> 32) as u32, i as u32])
}

/// The 32 random bits of element i: the XOR of block i's two words.
pub fn bits32(key: [u32; 2], i: u64) -> u32 {
    let [a, b] = block(key, i);
    a ^ b
}

/// The 64 random bits of element i: block i's words, high then low.
pub fn bits64(key: [u32; 2], i: u64) -> u64 {
    let [a, b] = block(key, i);
    (u64::from(a) << 32) | u64::from(b)
}

/// The key for a 64-bit seed: its high and low words (JAX's `PRNGKey`).
pub fn key_from_seed(seed: u64) -> [u32; 2] {
    [(seed >> 32) as u32, seed as u32]
}

/// `count` independent keys from one: key j is block j under the key (JAX's `split`).
pub fn split(key: [u32; 2], count: usize) -> Vec<[u32; 2]> {
    (0..count as u64).map(|j| block(key, j)).collect()
}

/// A key for `data` derived from `key`: the encryption of (data's high, low words)
/// (JAX's `fold_in`).
pub fn fold_in(key: [u32; 2], data: u64) -> [u32; 2] {
    block(key, data)
}

/// A key as the `i64[2]` tensor the random primitives read.
pub fn key_tensor(key: [u32; 2]) -> Tensor {
    Tensor::i64([2], vec![i64::from(key[0]), i64::from(key[1])]).expect("two words")
}

/// The key tensor for a 64-bit seed.
pub fn key(seed: u64) -> Tensor {
    key_tensor(key_from_seed(seed))
}

fn word(v: i64, position: usize) -> Result<u32, KernelError> {
    u32::try_from(v).map_err(|_| {
        KernelError::Domain(format!(
            "key word {v} at position {position}, expected 0 <= word < 2^32"
        ))
    })
}

/// The two words of a key tensor, or a domain error naming the bad word.
pub fn key_words(t: &Tensor) -> Result<[u32; 2], KernelError> {
    let a = t
        .as_i64()
        .ok_or_else(|| KernelError::Unsupported(format!("a key of dtype {}", t.dtype())))?;
    let d = a.data();
    Ok([word(d[0], 0)?, word(d[1], 1)?])
}

/// The two words of a key given as exact rationals (the rational interpreter's form).
pub fn rational_key_words(t: &RArray) -> Result<[u32; 2], KernelError> {
    let idx = crate::prim::structural::one_hot::rational_indices(t)?;
    Ok([word(idx.data()[0], 0)?, word(idx.data()[1], 1)?])
}

/// Keys as an i64 array of the given dims (the last is 2).
pub fn keys_array(keys: &[[u32; 2]], dims: Vec<usize>) -> Array<i64> {
    let data = keys
        .iter()
        .flat_map(|k| [i64::from(k[0]), i64::from(k[1])])
        .collect();
    Array::new(dims, data).expect("two words per key")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random123's known-answer vectors for Threefry-2x32-20 (kat_vectors), as JAX tests them.
    #[test]
    fn threefry_matches_the_known_answers() {
        let cases = [
            ([0, 0], [0, 0], [0x6B20_0159, 0x99BA_4EFE]),
            (
                [u32::MAX, u32::MAX],
                [u32::MAX, u32::MAX],
                [0x1CB9_96FC, 0xBB00_2BE7],
            ),
            (
                [0x1319_8A2E, 0x0370_7344],
                [0x243F_6A88, 0x85A3_08D3],
                [0xC492_3A9C, 0x483D_F7A0],
            ),
        ];
        for (key, counter, want) in cases {
            assert_eq!(threefry2x32(key, counter), want, "key {key:x?}");
        }
    }

    #[test]
    fn keys_have_two_words_in_range() {
        assert_eq!(key_from_seed(0x1_0000_0002), [1, 2]);
        let bad = Tensor::i64([2], vec![0, -1]).unwrap();
        let e = key_words(&bad).unwrap_err().to_string();
        assert!(e.contains("key word -1 at position 1"), "{e}");
        let big = Tensor::i64([2], vec![1 << 32, 0]).unwrap();
        assert!(key_words(&big).is_err());
    }
}
