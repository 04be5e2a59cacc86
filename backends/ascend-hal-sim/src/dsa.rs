//! DSA entries (STARS type 15): the random-number task the runtime builds for
//! `aclrtRandomNumAsync`.
//!
//! Facts from the runtime's source (`hicann/runtime`): `GetDsaSqeByRandomNumTask`
//! (`core/src/task/task_info/random_num_task.cc`) allocates 16 bytes (plus room for the entry) of
//! device memory, copies the two function parameters into it (`RandomParamCfgInfo`: `firstParam`
//! then `secondParam`, 8 bytes each, `core/inc/task/task_info_base.hpp`) and fills a
//! `rtStarsDsaSqe_t` (`pkg_inc/runtime/rt_external_stars_define.h`): after the 8-byte header,
//! the word at byte 8 holds `start` (bit 0), `functionType` (bits 1-3: dropout 0, uniform 1,
//! normal 2, truncated normal 3), `dataType` (bits 4-6: the runtime's numbers, INT32 0 … BF16 4,
//! FP16 5, FP32 6), `algoType` (7-9), `paramVldBitmap` (10-14) and `paramAddrValBitmap` (15-21);
//! then the result, counter ("state"), parameter-block, seed and count fields, 64 bits each from
//! byte 16. A set bit `i` of `paramAddrValBitmap` says item `i` is a value, a clear bit that it
//! is the device address of its value: 0 dropout ratio, 1 min, 2 max, 3 mean, 4 stddev (all in
//! the parameter block), 5 seed, 6 count (in the entry).
//!
//! The engine (Philox4_32_10, per the runtime's example) is not public: the emulation runs
//! xstream-core's reference generator over the decoded fields, as the ACL simulator does, so
//! the two test doubles agree. The counter is read, not advanced. Integer uniform (the engine's
//! range rule is not in the source) and addresses outside device memory are refused (the entry
//! completes with an error).

use crate::memory;
use crate::queue::{u32_at, u64_at};
use xstream_core::random::{Distribution, RandomType};

/// Reads `len` (at most 8) bytes at device address `addr`, zero-extended.
fn read_device(addr: usize, len: usize) -> Option<[u8; 8]> {
    let len = len.min(8);
    if !memory::is_device_range(addr, len) {
        return None;
    }
    let mut b = [0u8; 8];
    // SAFETY: `[addr, addr + len)` lies inside one live device allocation (checked above).
    unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, b.as_mut_ptr(), len) };
    Some(b)
}

/// Item `bit` of the entry: `raw` itself when the bitmap says it is a value, else the `size`
/// bytes at the device address `raw`.
fn item(bitmap: u32, bit: u32, raw: u64, size: usize) -> Option<[u8; 8]> {
    if (bitmap >> bit) & 1 == 1 {
        Some(raw.to_le_bytes())
    } else {
        read_device(raw as usize, size)
    }
}

/// Executes one DSA entry; `false` when it is refused (its completion reports an error).
pub fn execute(e: &[u8; 64]) -> bool {
    let w = u32_at(e, 8);
    let func = (w >> 1) & 7;
    let dtype = (w >> 4) & 7;
    let vals = (w >> 15) & 0x7f;
    let ty = match dtype {
        4 => RandomType::BF16,
        5 => RandomType::F16,
        6 => RandomType::F32,
        other => {
            crate::trace!("DSA random numbers of data type {other}: not emulated, refused");
            return false;
        }
    };
    let (result, state, block) = (
        u64_at(e, 16) as usize,
        u64_at(e, 24) as usize,
        u64_at(e, 32) as usize,
    );
    let size = ty.size();
    let decoded = (|| {
        let seed = u64::from_le_bytes(item(vals, 5, u64_at(e, 40), 8)?);
        let num = u64::from_le_bytes(item(vals, 6, u64_at(e, 48), 8)?);
        let first = u64::from_le_bytes(read_device(block, 8)?);
        let second = u64::from_le_bytes(read_device(block.checked_add(8)?, 8)?);
        let p = |bit, raw| item(vals, bit, raw, size).map(|b| ty.decode(&b) as f32);
        let dist = match func {
            0 => Distribution::DropoutMask {
                drop_prob: p(0, first)?,
            },
            1 => Distribution::Uniform {
                min: p(1, first)?,
                max: p(2, second)?,
            },
            2 => Distribution::Normal {
                mean: p(3, first)?,
                std: p(4, second)?,
            },
            3 => Distribution::TruncatedNormal {
                mean: p(3, first)?,
                std: p(4, second)?,
            },
            _ => return None,
        };
        let mut c = [0u8; 16];
        c[..8].copy_from_slice(&read_device(state, 8)?);
        c[8..].copy_from_slice(&read_device(state.checked_add(8)?, 8)?);
        Some((dist, seed, num, u128::from_le_bytes(c)))
    })();
    let Some((dist, seed, num, ctr)) = decoded else {
        crate::trace!("DSA entry: a field or an address outside device memory, refused");
        return false;
    };
    let bytes = match dist {
        Distribution::DropoutMask { .. } => num.div_ceil(8),
        _ => num.saturating_mul(size as u64),
    };
    let Ok(bytes) = usize::try_from(bytes) else {
        return false;
    };
    if !memory::is_device_range(result, bytes) {
        crate::trace!("DSA entry: {bytes} result bytes at {result:#x} outside device memory");
        return false;
    }
    crate::trace!("DSA random numbers: {dist:?} {ty:?}, {num} elements into {result:#x}");
    // SAFETY: the result range lies inside one live device allocation (checked above), and no
    // other slice of it lives while this one does.
    let out = unsafe { std::slice::from_raw_parts_mut(result as *mut u8, bytes) };
    xstream_core::random::generate(dist, ty, seed, ctr, out);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use xstream_core::random::RandomFill;

    /// The entry the runtime builds for a uniform f32 fill of `num` numbers, min by value and
    /// max by address.
    fn entry(result: usize, state: usize, block: usize, seed: u64, num: u64) -> [u8; 64] {
        let mut e = [0u8; 64];
        e[0] = 15;
        // start, uniform (1), FP32 (6); values: min (bit 1), seed (5), count (6).
        let vals: u32 = (1 << 1) | (1 << 5) | (1 << 6);
        let w: u32 = 1 | (1 << 1) | (6 << 4) | (0b00110 << 10) | (vals << 15);
        e[8..12].copy_from_slice(&w.to_le_bytes());
        for (at, v) in [
            (16, result as u64),
            (24, state as u64),
            (32, block as u64),
            (40, seed),
            (48, num),
        ] {
            e[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        e
    }

    #[test]
    fn a_uniform_entry_runs_the_reference_with_values_and_addresses() {
        let out = memory::alloc(4096).unwrap();
        let state = memory::alloc(16).unwrap();
        let block = memory::alloc(16).unwrap();
        let max = memory::alloc(4).unwrap();
        // SAFETY: fresh device allocations of at least these sizes.
        unsafe {
            std::ptr::write_unaligned(state as *mut u128, 3);
            std::ptr::write_unaligned(block as *mut u64, u64::from(2.0f32.to_bits()));
            std::ptr::write_unaligned((block + 8) as *mut u64, max as u64);
            std::ptr::write_unaligned(max as *mut f32, 5.0);
        }
        assert!(execute(&entry(out, state, block, 11, 100)));
        let mut want = vec![0u8; 400];
        let f = RandomFill::new(
            Distribution::Uniform { min: 2.0, max: 5.0 },
            RandomType::F32,
            11,
        );
        xstream_core::random::fill(&f.at(3), &mut want);
        // SAFETY: 400 bytes of the 4096-byte allocation.
        let got = unsafe { std::slice::from_raw_parts(out as *const u8, 400) };
        assert_eq!(got, &want[..]);
        // SAFETY: as above, the byte after the result.
        let after = unsafe { *((out + 400) as *const u8) };
        assert_eq!(after, 0, "nothing past the result");
        // A result outside device memory, and an integer type, are refused.
        let mut host = [0u8; 400];
        assert!(!execute(&entry(
            host.as_mut_ptr() as usize,
            state,
            block,
            11,
            100
        )));
        let mut e = entry(out, state, block, 11, 100);
        e[8] &= 0x8f; // data type INT32 (0)
        assert!(!execute(&e));
        for a in [out, state, block, max] {
            assert!(memory::free(a));
        }
    }
}
