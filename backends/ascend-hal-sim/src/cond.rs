//! STARS conditional entries (type 20) and write-value entries (type 8) the runtime builds for
//! `aclrtValueWait` / `aclrtValueWrite` on the 910B.
//!
//! Facts from the runtime's source (`hicann/runtime`):
//!
//! * A value write is one write-value entry (`ConstructSqeForMemWriteValueTask`,
//!   `core/src/task/task_info/memory/memory_task_v100.cc`; layout `RtStarsWriteValueSqe`,
//!   `core/inc/sqe/v100/stars_sqe.hpp`): the address in words 4–5 (49 bits), the size class
//!   `awsize` (0: 8 bits … 3: 64 bits, `RT_STARS_WRITE_VALUE_SIZE_TYPE_*` in
//!   `core/inc/stars/stars_base.hpp`), the value from word 8 on. The runtime also resets events
//!   with this entry type; the emulation writes only into its own device memory and completes
//!   other targets without effect.
//! * A value wait (`MemWaitValueTask`, same file) is a place-holder, a write-value, a conditional
//!   entry and a place-holder. The conditional entry (`RtStarsFunctionCallSqe`: `conds_sub_type`
//!   at byte 8, 9 = `CONDS_SUB_TYPE_MEM_WAIT_VALUE`) loads the address and the size of a
//!   condition program into r1 / r2 (`ConstructFunctionCallInstr`) and calls it. The runtime
//!   writes that program into device memory from one fixed template,
//!   `RtStarsMemWaitValueLastInstrFc` (`core/inc/stars/stars_cond_isa_define.hpp`, built by
//!   `ConstructMemWaitValueInstr2`, `core/src/task/stars_cond_isa_helper.cc`): r5 = value2,
//!   r2 = load(addr), r1 = value1, r2 = r2 op r1, then "branch(r2, r5) → success", else count a
//!   loop and, past the limit, rewind the SQ head to the first entry of the wait (`goto_pre`)
//!   so the whole wait runs again. The flag maps to (op, branch, value1, value2) in
//!   `ConvertConditionToOpAndBranchFunc`: GEQ → (OR, BGE, 0, v), EQ → (OR, BEQ, 0, v), AND →
//!   (AND, BNE, v, 0), NOR → (OR, BNE, v, all ones).
//!
//! The emulation does **not** run condition programs in general (the condition processor's
//! machine is not in the source). It recognises this one template: it checks the opcode and
//! function fields of the instructions it reads (encodings in
//! `core/inc/cond_isa/v100/stars_cond_isa_struct.hpp` and
//! `core/inc/stars/stars_base_cond_isa_define.hpp`), takes the address, the load width, the
//! operation, the branch and both values from them, and holds the SQ until the condition
//! holds, which is what the program's loop with its rewind amounts to. Any other program, and
//! every other conditional sub-type, completes with an error report.

use crate::memory;

/// `RT_STARS_SQE_TYPE_COND`.
pub const SQE_COND: u8 = 20;
/// `CONDS_SUB_TYPE_MEM_WAIT_VALUE`.
pub const SUB_MEM_WAIT_VALUE: u8 = 9;
/// `CONDS_SUB_TYPE_MODEL_EXEC`.
pub const SUB_MODEL_EXEC: u8 = 1;

const OP_LWI: u32 = 0b101_1011;
const OP_LOAD_IMM: u32 = 0b000_0111;
const OP_OP: u32 = 0b011_0011;
const OP_BRANCH: u32 = 0b110_0011;

/// Byte offsets of the instructions read from the `RtStarsMemWaitValueLastInstrFc` template.
mod at {
    pub const LHWI_VALUE2: usize = 4;
    pub const LLWI_VALUE2: usize = 8;
    pub const LOAD_VALUE: usize = 28;
    pub const LHWI_VALUE1: usize = 36;
    pub const LLWI_VALUE1: usize = 40;
    pub const OP: usize = 48;
    pub const BRANCH1: usize = 68;
    /// Bytes read (up to and including `branch1`).
    pub const LEN: usize = 72;
}

fn word(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Bits `lo..lo + n` of `w`.
fn bits(w: u32, lo: u32, n: u32) -> u32 {
    (w >> lo) & ((1u32 << n) - 1)
}

/// The 64-bit immediate of an LHWI (4 bytes at `hi`) + LLWI (8 bytes at `lo`) pair loading
/// register `rd`; `None` when the instructions are not that pair.
fn imm64(b: &[u8], hi: usize, lo: usize, rd: u32) -> Option<u64> {
    let (h, l0, l1) = (word(b, hi), word(b, lo), word(b, lo + 4));
    let ok = bits(h, 0, 7) == OP_LWI
        && bits(h, 12, 3) == 0
        && bits(h, 7, 3) == rd
        && bits(l0, 0, 7) == OP_LWI
        && bits(l0, 12, 3) == 1
        && bits(l0, 7, 3) == rd;
    ok.then(|| {
        (u64::from(bits(h, 17, 15)) << 49) | (u64::from(bits(l0, 15, 17)) << 32) | u64::from(l1)
    })
}

/// A value-wait condition decoded from the runtime's program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wait {
    /// Address loaded.
    pub addr: u64,
    /// Bytes loaded (1, 2, 4 or 8), zero-extended unless `signed`.
    pub width: usize,
    /// Sign-extend the loaded value (LB / LH / LW).
    pub signed: bool,
    /// `r2 op value1`: the OP instruction's func3 (0 ADD, 4 XOR, 6 OR, 7 AND).
    pub op: u32,
    /// The success branch's func3 (BEQ 0, BNE 1, BLT 4, BGE 5, BLTU 6, BGEU 7).
    pub branch: u32,
    /// r1.
    pub value1: u64,
    /// r5.
    pub value2: u64,
}

/// Decodes the program of `RtStarsMemWaitValueLastInstrFc` form in `p`; `None` for any other.
pub fn decode_wait(p: &[u8]) -> Option<Wait> {
    if p.len() < at::LEN {
        return None;
    }
    let value2 = imm64(p, at::LHWI_VALUE2, at::LLWI_VALUE2, 5)?;
    let value1 = imm64(p, at::LHWI_VALUE1, at::LLWI_VALUE1, 1)?;
    let (l0, l1) = (word(p, at::LOAD_VALUE), word(p, at::LOAD_VALUE + 4));
    if bits(l0, 0, 7) != OP_LOAD_IMM || bits(l0, 7, 3) != 2 {
        return None;
    }
    let (width, signed) = match bits(l0, 12, 3) {
        0 => (1, true),
        1 => (2, true),
        2 => (4, true),
        3 => (8, false),
        4 => (1, false),
        5 => (2, false),
        6 => (4, false),
        _ => return None,
    };
    let addr = (u64::from(bits(l0, 15, 17)) << 32) | u64::from(l1);
    // r2 = r2 op r1, func7 0 (ADD / XOR / OR / AND).
    let op = word(p, at::OP);
    let op_func3 = bits(op, 12, 3);
    if bits(op, 0, 7) != OP_OP
        || bits(op, 7, 3) != 2
        || bits(op, 15, 3) != 2
        || bits(op, 20, 3) != 1
        || bits(op, 25, 7) != 0
        || !matches!(op_func3, 0 | 4 | 6 | 7)
    {
        return None;
    }
    // branch(r2, r5).
    let br = word(p, at::BRANCH1);
    let branch = bits(br, 12, 3);
    if bits(br, 0, 7) != OP_BRANCH
        || bits(br, 15, 3) != 2
        || bits(br, 20, 3) != 5
        || !matches!(branch, 0 | 1 | 4 | 5 | 6 | 7)
    {
        return None;
    }
    Some(Wait {
        addr,
        width,
        signed,
        op: op_func3,
        branch,
        value1,
        value2,
    })
}

impl Wait {
    /// Whether the condition holds for the loaded bytes `raw` (little endian, `width` long).
    pub fn holds_for(&self, raw: u64) -> bool {
        let shift = 64 - 8 * self.width as u32;
        let r2 = if self.signed && shift > 0 {
            (((raw << shift) as i64) >> shift) as u64
        } else {
            raw
        };
        let r2 = match self.op {
            0 => r2.wrapping_add(self.value1),
            4 => r2 ^ self.value1,
            6 => r2 | self.value1,
            _ => r2 & self.value1,
        };
        let r5 = self.value2;
        match self.branch {
            0 => r2 == r5,
            1 => r2 != r5,
            4 => (r2 as i64) < (r5 as i64),
            5 => (r2 as i64) >= (r5 as i64),
            6 => r2 < r5,
            _ => r2 >= r5,
        }
    }

    /// Reads the watched location and evaluates the condition; `None` when the address is not
    /// inside emulated device memory.
    pub fn holds(&self) -> Option<bool> {
        let a = usize::try_from(self.addr).ok()?;
        if !memory::is_device_range(a, self.width) {
            return None;
        }
        let mut b = [0u8; 8];
        // SAFETY: `a .. a + width` lies inside an emulated device allocation (checked above).
        unsafe { std::ptr::copy_nonoverlapping(a as *const u8, b.as_mut_ptr(), self.width) };
        Some(self.holds_for(u64::from_le_bytes(b)))
    }
}

/// The condition program a value-wait conditional entry calls: (address, length in bytes), from
/// the entry's r1 / r2 immediates (length given in 4-byte words).
pub fn function_call(e: &[u8]) -> Option<(usize, usize)> {
    let addr = imm64(e, 16, 20, 1)?;
    let words = imm64(e, 28, 32, 2)?;
    Some((
        usize::try_from(addr).ok()?,
        usize::try_from(words).ok()? * 4,
    ))
}

/// Decodes the value wait a conditional entry `e` stands for (sub-type 9, program in emulated
/// device memory, of the runtime's template).
pub fn value_wait(e: &[u8]) -> Option<Wait> {
    if e[8] != SUB_MEM_WAIT_VALUE {
        return None;
    }
    let (addr, len) = function_call(e)?;
    if len < at::LEN || !memory::is_device_range(addr, len) {
        return None;
    }
    // SAFETY: the program lies inside an emulated device allocation (checked above).
    let p = unsafe { std::slice::from_raw_parts(addr as *const u8, at::LEN) };
    decode_wait(p)
}

/// Executes a write-value entry: writes its value when the target lies in emulated device
/// memory; other targets (the runtime's event-reset entries name device registers) are left
/// alone. Returns whether it wrote.
pub fn write_value(e: &[u8]) -> bool {
    let w5 = word(e, 20);
    let addr = (u64::from(bits(w5, 0, 17)) << 32) | u64::from(word(e, 16));
    let size = match bits(w5, 20, 3) {
        n @ 0..=5 => 1usize << n,
        _ => return false,
    };
    let Ok(a) = usize::try_from(addr) else {
        return false;
    };
    if a == 0 || !memory::is_device_range(a, size) {
        return false;
    }
    crate::trace!("write value: {size} bytes at {a:#x}");
    // SAFETY: the target lies inside an emulated device allocation (checked above); the value
    // is the entry's bytes from offset 32 (at most 32 bytes, the entry's 8 value words).
    unsafe { std::ptr::copy_nonoverlapping(e[32..].as_ptr(), a as *mut u8, size) };
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lhwi(rd: u32, v: u64) -> u32 {
        OP_LWI | (rd << 7) | (((v >> 49) as u32 & 0x7fff) << 17)
    }
    fn llwi(rd: u32, v: u64) -> [u32; 2] {
        [
            OP_LWI | (rd << 7) | (1 << 12) | (((v >> 32) as u32 & 0x1ffff) << 15),
            v as u32,
        ]
    }

    /// A program as `ConstructMemWaitValueInstr2` lays it out (only the fields read here).
    fn program(addr: u64, func3_load: u32, op: u32, branch: u32, v1: u64, v2: u64) -> Vec<u8> {
        let mut w = [0u32; at::LEN / 4];
        w[at::LHWI_VALUE2 / 4] = lhwi(5, v2);
        w[at::LLWI_VALUE2 / 4..at::LLWI_VALUE2 / 4 + 2].copy_from_slice(&llwi(5, v2));
        w[at::LOAD_VALUE / 4] =
            OP_LOAD_IMM | (2 << 7) | (func3_load << 12) | (((addr >> 32) as u32 & 0x1ffff) << 15);
        w[at::LOAD_VALUE / 4 + 1] = addr as u32;
        w[at::LHWI_VALUE1 / 4] = lhwi(1, v1);
        w[at::LLWI_VALUE1 / 4..at::LLWI_VALUE1 / 4 + 2].copy_from_slice(&llwi(1, v1));
        w[at::OP / 4] = OP_OP | (2 << 7) | (op << 12) | (2 << 15) | (1 << 20);
        w[at::BRANCH1 / 4] = OP_BRANCH | (branch << 12) | (2 << 15) | (5 << 20);
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn the_four_wait_kinds_decode_and_hold_as_documented() {
        let addr = 0x1_2345_6789_abc8;
        // GEQ 7: (OR, BGE, 0, 7).
        let geq = decode_wait(&program(addr, 3, 6, 5, 0, 7)).expect("GEQ");
        assert_eq!((geq.addr, geq.width), (addr, 8));
        assert!(!geq.holds_for(6) && geq.holds_for(7) && geq.holds_for(8));
        // EQ 7: (OR, BEQ, 0, 7).
        let eq = decode_wait(&program(addr, 3, 6, 0, 0, 7)).expect("EQ");
        assert!(eq.holds_for(7) && !eq.holds_for(8));
        // AND 0b100: (AND, BNE, 4, 0).
        let and = decode_wait(&program(addr, 3, 7, 1, 4, 0)).expect("AND");
        assert!(!and.holds_for(0b011) && and.holds_for(0b110));
        // NOR 0b1: ~(x | 1) != 0, i.e. (OR, BNE, 1, all ones).
        let nor = decode_wait(&program(addr, 3, 6, 1, 1, u64::MAX)).expect("NOR");
        assert!(nor.holds_for(0) && !nor.holds_for(u64::MAX - 1));
        // An 8-bit wait loads one byte, zero-extended (LBU).
        let b = decode_wait(&program(addr, 4, 6, 5, 0, 200)).expect("LBU");
        assert_eq!(b.width, 1);
        assert!(b.holds_for(200) && !b.holds_for(199));
    }

    #[test]
    fn other_programs_are_not_recognised() {
        let good = program(0x1000, 3, 6, 5, 0, 7);
        // Opcodes of the load, the operation and the branch; the LLWI's func3 (bit 12).
        for (byte, bit) in [
            (at::LOAD_VALUE, 0),
            (at::OP, 1),
            (at::BRANCH1, 2),
            (at::LLWI_VALUE1 + 1, 4),
        ] {
            let mut p = good.clone();
            p[byte] ^= 1 << bit;
            assert_eq!(decode_wait(&p), None, "flipped bit {bit} of byte {byte}");
        }
        assert_eq!(decode_wait(&good[..at::LEN - 4]), None);
    }
}
