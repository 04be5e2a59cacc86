//! An independent reference for the built-in LCG kernel (`Kernel::Lcg`, `xstream_lcg`).
//!
//! The host backend's kernel *is* [`xstream_core::lcg_reference`] (a loop of `rounds`
//! multiply-adds per word), so comparing a backend's kernel with that function proves nothing
//! on host. The conformance checks compare with [`lcg_jump`] instead: the same generator
//! written as a composition of affine maps (x ↦ a·x + c, squared by doubling, mod 2³²), which
//! shares no code with the loop. Both are pinned by [`LCG_KNOWN`], values computed outside
//! Rust by this Python one-liner (2026-11-25):
//!
//! ```text
//! python3 -c "M=2**32
//! def f(x,n):
//!     for _ in range(n): x=(x*1664525+1013904223)%M
//!     return x
//! for s in [0,1,0xFFFFFFFF,0x12345678,0xDEADBEEF]:
//!     for n in [0,1,2,7,9,1000]: print(hex(s), n, hex(f(s,n)))"
//! ```

/// The LCG's multiplier (Numerical Recipes).
const A: u32 = 1_664_525;
/// The LCG's increment.
const C: u32 = 1_013_904_223;

/// (word, rounds, word after `rounds` rounds), from the Python one-liner in the module docs.
pub const LCG_KNOWN: [(u32, u32, u32); 30] = [
    (0x00000000, 0, 0x00000000),
    (0x00000000, 1, 0x3c6ef35f),
    (0x00000000, 2, 0x47502932),
    (0x00000000, 7, 0x57fe6c2d),
    (0x00000000, 9, 0x81fdbee7),
    (0x00000000, 1000, 0xea107308),
    (0x00000001, 0, 0x00000001),
    (0x00000001, 1, 0x3c88596c),
    (0x00000001, 2, 0x5e8885db),
    (0x00000001, 7, 0xc656dd92),
    (0x00000001, 9, 0x0438e694),
    (0x00000001, 1000, 0x26799aa9),
    (0xffffffff, 0, 0xffffffff),
    (0xffffffff, 1, 0x3c558d52),
    (0xffffffff, 2, 0x3017cc89),
    (0xffffffff, 7, 0xe9a5fac8),
    (0xffffffff, 9, 0xffc2973a),
    (0xffffffff, 1000, 0xada74b67),
    (0x12345678, 0, 0x12345678),
    (0x12345678, 1, 0x75432777),
    (0x12345678, 2, 0xcd305e6a),
    (0x12345678, 7, 0xea0f8185),
    (0x12345678, 9, 0xa63075ff),
    (0x12345678, 1000, 0xed5f1c80),
    (0xdeadbeef, 0, 0xdeadbeef),
    (0xdeadbeef, 1, 0x6aabdf82),
    (0xdeadbeef, 2, 0xf5e918f9),
    (0xdeadbeef, 7, 0x37fa3f78),
    (0xdeadbeef, 9, 0xd4932f6a),
    (0xdeadbeef, 1000, 0xc172f057),
];

/// `rounds` rounds of the LCG applied to one word, by composing the affine map with itself
/// (binary exponentiation): O(log rounds), no shared code with the kernel's loop.
pub fn lcg_word_jump(x: u32, rounds: u32) -> u32 {
    // (mul, add) is the map y ↦ mul·y + add; `acc` accumulates the maps of the set bits.
    let (mut mul, mut add) = (A, C);
    let (mut acc_mul, mut acc_add) = (1u32, 0u32);
    let mut n = rounds;
    while n > 0 {
        if n & 1 == 1 {
            // acc ∘ step: y ↦ mul·(acc_mul·y + acc_add) + add
            acc_add = mul.wrapping_mul(acc_add).wrapping_add(add);
            acc_mul = mul.wrapping_mul(acc_mul);
        }
        // step ∘ step
        add = mul.wrapping_mul(add).wrapping_add(add);
        mul = mul.wrapping_mul(mul);
        n >>= 1;
    }
    acc_mul.wrapping_mul(x).wrapping_add(acc_add)
}

/// [`lcg_word_jump`] over every whole little-endian u32 word of `data` (a trailing partial word
/// is left as it is, as the kernels do).
pub fn lcg_jump(data: &mut [u8], rounds: u32) {
    for w in data.chunks_exact_mut(4) {
        let x = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        w.copy_from_slice(&lcg_word_jump(x, rounds).to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jump_matches_the_known_values() {
        for (x, n, want) in LCG_KNOWN {
            assert_eq!(lcg_word_jump(x, n), want, "jump: {x:#x} after {n} rounds");
        }
    }

    #[test]
    fn the_kernel_loop_matches_the_known_values() {
        for (x, n, want) in LCG_KNOWN {
            let mut b = x.to_le_bytes().to_vec();
            xstream_core::lcg_reference(&mut b, n);
            assert_eq!(b, want.to_le_bytes(), "loop: {x:#x} after {n} rounds");
        }
    }

    #[test]
    fn jump_and_loop_agree_on_a_buffer_and_leave_a_partial_word() {
        let init: Vec<u8> = (0..4099u32)
            .map(|i| (i.wrapping_mul(31) % 251) as u8)
            .collect();
        for rounds in [0, 1, 3, 32, 255] {
            let (mut a, mut b) = (init.clone(), init.clone());
            lcg_jump(&mut a, rounds);
            xstream_core::lcg_reference(&mut b, rounds);
            assert_eq!(a, b, "{rounds} rounds");
            assert_eq!(a[4096..], init[4096..], "the partial word is left alone");
        }
    }
}
