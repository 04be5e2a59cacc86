//! SDMA reduce: an SDMA entry whose `opcode` is not 0 combines the source into the destination
//! element by element (`dst[i] = kind(dst[i], src[i])`) instead of copying.
//!
//! Facts from the runtime's source (`hicann/runtime`): the 910B runtime builds a reduce as an
//! ordinary SDMA entry (`core/src/task/task_info/memory/memory_task_v100.cc`, `sqe->opcode =
//! GetOpcodeForReduce(...)`), the opcode being the data type in the high nibble and the kind in
//! the low nibble (`core/src/task/task_info/memory/memory_task.cc`, `ReduceOpcodeHigh` /
//! `ReduceOpcodeLow`; values `RT_STARS_MEMCPY_ASYNC_DATA_TYPE_*` / `RT_STARS_MEMCPY_ASYNC_OP_KIND_*`
//! in `core/inc/stars/stars_base.hpp`). Before building it, `aclrtReduceAsync` checks the kind and
//! type against the driver's chip capability (`CheckReduceCapability`,
//! `core/src/launch/memory_stars.cc`): bit `kind - 10` of `sdma_reduce_kind` and bit `type` of
//! `sdma_reduce_support` (`halGetChipCapability`, `struct halCapabilityInfo`,
//! `pkg_inc/driver/ascend_hal_base.h`).
//!
//! The emulation reports the kinds SUM, MAX and MIN and the types the ACL simulator's `a2`
//! product has (fp32, fp16, int16, int8, int32, bf16: the ACL documentation of
//! `aclrtReduceAsync` for Atlas A2 products; the real capability comes from the driver, whose
//! source is not public), so the two test doubles agree. EQUAL is not reported: its element
//! semantics are the SDMA engine's and not in the source (the simulator refuses it too). The
//! arithmetic is the simulator's: integer sums wrap; fp16 / bf16 go through `f32` and round to
//! nearest even; a trailing partial element is left untouched.

#[path = "../../ascend-sim/src/elementwise.rs"]
mod elementwise;

use crate::memory;
use elementwise::{apply, Kind, Ty};

/// `sdma_reduce_support` reported by `halGetChipCapability`: bits `CAP_SDMA_REDUCE_FP32` (0),
/// `FP16` (1), `INT16` (2), `INT8` (4), `INT32` (5), `BFP16` (6).
pub const REDUCE_TYPES: u32 = 0x77;
/// `sdma_reduce_kind` reported by `halGetChipCapability`: `CAP_SDMA_REDUCE_KIND_ADD` (0), `MAX`
/// (1), `MIN` (2).
pub const REDUCE_KINDS: u32 = 0x7;

fn decode(opcode: u32) -> Option<(Ty, Kind)> {
    let ty = match opcode & 0xf0 {
        0x00 => Ty::I8,
        0x10 => Ty::I16,
        0x20 => Ty::I32,
        0x30 => Ty::U8,
        0x40 => Ty::U16,
        0x50 => Ty::U32,
        0x60 => Ty::F16,
        0x70 => Ty::F32,
        0x80 => Ty::Bf16,
        _ => return None,
    };
    let kind = match opcode & 0x0f {
        1 => Kind::Add,
        2 => Kind::Max,
        3 => Kind::Min,
        _ => return None,
    };
    Some((ty, kind))
}

/// Executes an SDMA reduce entry: `len` bytes at `src` combined into `dst` by `opcode`.
/// Returns `false` (the entry fails) for an opcode the emulation does not execute or a range
/// that overruns a device allocation.
pub fn execute(opcode: u32, dst: usize, src: usize, len: usize) -> bool {
    let Some((ty, k)) = decode(opcode) else {
        crate::trace!("SDMA reduce opcode {opcode:#x}: not executed");
        return false;
    };
    let n = len - len % ty.size();
    if n == 0 {
        return true;
    }
    if dst == 0 || src == 0 {
        return false;
    }
    for a in [dst, src] {
        if memory::find(a).is_some() && !memory::is_device_range(a, n) {
            return false;
        }
    }
    crate::trace!("SDMA reduce {ty:?}/{k:?} {n} bytes {src:#x} -> {dst:#x}");
    // SAFETY: both ranges are valid for `n` bytes (device ranges checked above, host ranges the
    // runtime's buffers of that size); the source is copied first so overlap cannot alias.
    let s = unsafe { std::slice::from_raw_parts(src as *const u8, n) }.to_vec();
    // SAFETY: as above; no other slice of this range lives while this one does.
    let d = unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, n) };
    apply(d, &s, ty, k);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_decode_as_the_runtime_builds_them() {
        // fp32 (0x70) | ADD (1), int8 (0x00) | MIN (3), bf16 (0x80) | MAX (2).
        assert_eq!(decode(0x71), Some((Ty::F32, Kind::Add)));
        assert_eq!(decode(0x03), Some((Ty::I8, Kind::Min)));
        assert_eq!(decode(0x82), Some((Ty::Bf16, Kind::Max)));
        // 0 is a plain copy, 4 is EQUAL, 0xF0 is the runtime's reserved value.
        assert_eq!(decode(0x00), None);
        assert_eq!(decode(0x74), None);
        assert_eq!(decode(0xf1), None);
    }

    #[test]
    fn reduce_combines_whole_elements() {
        let mut dst: Vec<u8> = [1.5f32, -2.0, 3.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        dst.push(0xaa); // a trailing partial element stays untouched
        let src: Vec<u8> = [0.5f32, 5.0, -1.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .chain([0x55])
            .collect();
        assert!(execute(
            0x71,
            dst.as_mut_ptr() as usize,
            src.as_ptr() as usize,
            13
        ));
        let got: Vec<f32> = dst[..12]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, [2.0, 3.0, 2.0]);
        assert_eq!(dst[12], 0xaa);
        let mut d8 = [5i8, -7, 100];
        let s8 = [3i8, -9, 27];
        assert!(execute(
            0x02,
            d8.as_mut_ptr() as usize,
            s8.as_ptr() as usize,
            3
        ));
        assert_eq!(d8, [5, -7, 100]);
        assert!(execute(
            0x01,
            d8.as_mut_ptr() as usize,
            s8.as_ptr() as usize,
            3
        ));
        assert_eq!(d8, [8, -16, 127]);
        assert!(!execute(
            0x74,
            d8.as_mut_ptr() as usize,
            s8.as_ptr() as usize,
            3
        ));
    }
}
