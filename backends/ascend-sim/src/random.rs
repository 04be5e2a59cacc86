//! `aclrtRandomNumAsync`: the runtime's built-in random-number task (no kernel binary), as the
//! CANN runtime's source shows it (hicann/runtime; files listed in `docs/simulators.md`,
//! section "ACL: aclrtRandomNumAsync").
//!
//! `aclError aclrtRandomNumAsync(const aclrtRandomNumTaskInfo* taskInfo, aclrtStream stream,
//! void* reserve)` enqueues `randomNum` numbers of a distribution (dropout bitmask, uniform,
//! normal, truncated normal) into `randomResultAddr`, from the 128-bit counter at
//! `randomCounterAddr` under `randomSeed`. The checks, in the runtime's order:
//!
//! 1. ACL layer: `taskInfo` NULL → 100000; `dataType` outside the seven it maps (`INT32`,
//!    `INT64`, `UINT32`, `UINT64`, `BF16`, `FLOAT16`, `FLOAT`) → 100000. The layer then
//!    **writes the runtime's own type number back into the caller's `dataType`** (it casts the
//!    const away), so a task info passed a second time carries that number instead: the
//!    simulator does the same (`FLOAT` becomes 6, which the ACL layer then refuses as
//!    `INT16`; `INT32` becomes 0, i.e. `FLOAT`).
//! 2. Runtime layer: the chip's feature `RT_FEATURE_TASK_RAND_GENERATOR` (Atlas A2/A3 only;
//!    `XSIM_PRODUCT=910` and `310p` → 207000), then the stream handle (an unknown handle →
//!    100000, as everywhere in this simulator), then `reserve` not NULL → 107000.
//! 3. The current context (none → 107002), a stream of another context → 107003, the default
//!    stream inside a capture → the capture rule of every task.
//! 4. The task info, all 107000: a function type outside `[0, 4)` or a data type it does not
//!    take (dropout mask, normal, truncated normal: `BF16`, `FP16`, `FP32`; uniform: those and
//!    the four integer types); `randomCounterAddr` NULL; `randomResultAddr` NULL; `randomSeed`
//!    and `randomNum` with `isAddr` not 0 or 1 or a `size` outside `[1, 8]`; each parameter of
//!    the function likewise, its `size` at most the element size when it is a value (8 when an
//!    address).
//!
//! The runtime then copies the parameters into a 16-byte device block (`randomParaAddr`, or
//! one it allocates) and submits a DSA entry; the engine reads the counter and writes the
//! result. The simulator runs the task in stream order with xstream-core's reference generator
//! (Philox4x32-10, which ACL documents as the engine's algorithm; the engine's conversion to
//! the element type is not public, so only the distribution is modelled, not the bits). A
//! parameter given as an address (`isAddr` 1) is read from that address when the task runs.
//! The counter is read, not advanced (the documentation does not say the engine writes it
//! back). The dropout mask writes `ceil(randomNum / 8)` bytes, one bit per element, 1 where the
//! element is kept. Integer uniform passes the checks but its range rule (whether `max` is
//! included) is the engine's and not in the source: the simulator refuses it with 207000
//! rather than invent a result, as it does reduce's EQUAL. The task is captured into a model
//! run instance like every stream task.

use crate::codes::*;
use crate::config::{product, Product};
use crate::error::*;
use crate::stream::Stream;
use crate::task::*;
use std::ffi::c_void;
use std::sync::Arc;
use xstream_core::random::{Distribution, RandomType};

/// `aclrtRandomParaInfo`: a parameter by value or by device address.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AclrtRandomParaInfo {
    /// 0: `valueOrAddr` holds the value; 1: it holds an 8-byte address of the value.
    pub is_addr: u8,
    /// The value (little-endian, `size` bytes) or the address.
    pub value_or_addr: [u8; 8],
    /// The bytes of `valueOrAddr` in use.
    pub size: u8,
    /// Reserved.
    pub rsv: [u8; 6],
}

/// `aclrtRandomNumFuncParaInfo`: the function type and its (at most two) parameters (the
/// C union's largest member, two parameters).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct AclrtRandomNumFuncParaInfo {
    /// `aclrtRandomNumFuncType`.
    pub func_type: u32,
    /// dropout ratio / min / mean, then max / stddev.
    pub params: [AclrtRandomParaInfo; 2],
}

/// `aclrtRandomNumTaskInfo` (104 bytes on LP64).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AclrtRandomNumTaskInfo {
    /// `aclDataType` (rewritten by the call, see the module documentation).
    pub data_type: i32,
    /// The function and its parameters.
    pub func: AclrtRandomNumFuncParaInfo,
    /// Device memory for the 16-byte parameter block, or NULL.
    pub random_para_addr: *mut c_void,
    /// Device memory for the result.
    pub random_result_addr: *mut c_void,
    /// Device memory holding the 128-bit counter.
    pub random_counter_addr: *mut c_void,
    /// The seed (at most 8 bytes).
    pub random_seed: AclrtRandomParaInfo,
    /// The count of numbers (at most 8 bytes).
    pub random_num: AclrtRandomParaInfo,
    /// Reserved.
    pub rsv: [u8; 8],
}

/// `ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK`.
pub const DROPOUT_BITMASK: u32 = 0;
/// `ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS`.
pub const UNIFORM_DIS: u32 = 1;
/// `ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS`.
pub const NORMAL_DIS: u32 = 2;
/// `ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS`.
pub const TRUNCATED_NORMAL_DIS: u32 = 3;

/// The runtime's `rtRandomNumDataType` for an `aclDataType` the ACL layer maps.
fn rt_type(acl: i32) -> Option<i32> {
    Some(match acl {
        3 => 0,  // INT32
        9 => 1,  // INT64
        8 => 2,  // UINT32
        10 => 3, // UINT64
        27 => 4, // BF16
        1 => 5,  // FLOAT16
        0 => 6,  // FLOAT
        _ => return None,
    })
}

/// Element size of an `rtRandomNumDataType`.
fn rt_size(rt: i32) -> usize {
    match rt {
        1 | 3 => 8,
        4 | 5 => 2,
        _ => 4,
    }
}

/// The float type of an `rtRandomNumDataType` (None for the integer types).
fn rt_float(rt: i32) -> Option<RandomType> {
    match rt {
        4 => Some(RandomType::BF16),
        5 => Some(RandomType::F16),
        6 => Some(RandomType::F32),
        _ => None,
    }
}

/// The runtime's parameter rule (`isAddr` 0 or 1, `size` in `[1, max]`; `max` 8 for an
/// address).
fn check_param(p: &AclrtRandomParaInfo, what: &str, value_size: usize) -> R {
    if p.is_addr > 1 {
        return err(
            ACL_ERROR_RT_PARAM_INVALID,
            format!("{what}.isAddr {} is not 0 or 1", p.is_addr),
        );
    }
    let max = if p.is_addr == 1 { 8 } else { value_size };
    if p.size == 0 || usize::from(p.size) > max {
        return err(
            ACL_ERROR_RT_PARAM_INVALID,
            format!("{what}.size {} outside [1, {max}]", p.size),
        );
    }
    Ok(())
}

/// A parameter's bytes (zero-extended to 8), read from the task info (its `size` bytes) or,
/// for an address, the `value_size` bytes at that address of device memory.
///
/// # Safety
/// An address parameter must point to `value_size` readable bytes.
unsafe fn param_bytes(p: &AclrtRandomParaInfo, value_size: usize) -> [u8; 8] {
    let mut b = [0u8; 8];
    if p.is_addr == 1 {
        let addr = u64::from_le_bytes(p.value_or_addr) as usize as *const u8;
        // SAFETY: the caller's promise above.
        unsafe { std::ptr::copy_nonoverlapping(addr, b.as_mut_ptr(), value_size.min(8)) };
    } else {
        let n = usize::from(p.size).min(8);
        b[..n].copy_from_slice(&p.value_or_addr[..n]);
    }
    b
}

struct RandomTask {
    info: AclrtRandomNumTaskInfo,
    ty: RandomType,
}

// SAFETY: the task's pointers are device addresses (plain host memory in the simulator) that
// the caller of aclrtRandomNumAsync keeps valid until the task ran; only the stream worker
// dereferences them, in `run`.
unsafe impl Send for RandomTask {}
// SAFETY: as above; `run` takes `&self` and writes only the result range.
unsafe impl Sync for RandomTask {}

impl RandomTask {
    fn param(&self, i: usize) -> f32 {
        // SAFETY: aclrtRandomNumAsync's caller promised address parameters stay valid until
        // the task ran.
        let b = unsafe { param_bytes(&self.info.func.params[i], self.ty.size()) };
        self.ty.decode(&b) as f32
    }
}

impl ExtTask for RandomTask {
    fn run(&self, _stream: &Stream, _epoch: u64) {
        let i = &self.info;
        // SAFETY: as in `param`, for the seed, the count and the 16-byte counter.
        let (seed, num, ctr) = unsafe {
            let mut c = [0u8; 16];
            std::ptr::copy_nonoverlapping(
                i.random_counter_addr.cast::<u8>().cast_const(),
                c.as_mut_ptr(),
                16,
            );
            (
                u64::from_le_bytes(param_bytes(&i.random_seed, 8)),
                u64::from_le_bytes(param_bytes(&i.random_num, 8)),
                u128::from_le_bytes(c),
            )
        };
        let dist = match i.func.func_type {
            DROPOUT_BITMASK => Distribution::DropoutMask {
                drop_prob: self.param(0),
            },
            UNIFORM_DIS => Distribution::Uniform {
                min: self.param(0),
                max: self.param(1),
            },
            NORMAL_DIS => Distribution::Normal {
                mean: self.param(0),
                std: self.param(1),
            },
            _ => Distribution::TruncatedNormal {
                mean: self.param(0),
                std: self.param(1),
            },
        };
        let bytes = match dist {
            Distribution::DropoutMask { .. } => num.div_ceil(8),
            _ => num.saturating_mul(self.ty.size() as u64),
        };
        let Ok(bytes) = usize::try_from(bytes) else {
            return;
        };
        // SAFETY: the caller promised `randomResultAddr` holds the result (`randomNum`
        // elements) until the task ran; no other slice of it lives meanwhile.
        let out =
            unsafe { std::slice::from_raw_parts_mut(i.random_result_addr.cast::<u8>(), bytes) };
        xstream_core::random::generate(dist, self.ty, seed, ctr, out);
    }
}

/// The runtime's `CheckRandomNumTaskInfo` (step 4 of the module documentation), on the
/// runtime's data type `rt`.
fn check_task(t: &AclrtRandomNumTaskInfo, rt: i32) -> R {
    let f = t.func.func_type;
    let float = rt_float(rt).is_some();
    match f {
        DROPOUT_BITMASK | NORMAL_DIS | TRUNCATED_NORMAL_DIS if !float => {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("function type {f} takes bf16, fp16 or fp32, not data type {rt}"),
            );
        }
        DROPOUT_BITMASK..=TRUNCATED_NORMAL_DIS => {}
        _ => {
            return err(
                ACL_ERROR_RT_PARAM_INVALID,
                format!("function type {f} outside [0, 4)"),
            );
        }
    }
    if t.random_counter_addr.is_null() {
        return err(ACL_ERROR_RT_PARAM_INVALID, "randomCounterAddr is NULL");
    }
    if t.random_result_addr.is_null() {
        return err(ACL_ERROR_RT_PARAM_INVALID, "randomResultAddr is NULL");
    }
    check_param(&t.random_seed, "randomSeed", 8)?;
    check_param(&t.random_num, "randomNum", 8)?;
    let size = rt_size(rt);
    let names: &[&str] = match f {
        DROPOUT_BITMASK => &["dropoutRation"],
        UNIFORM_DIS => &["min", "max"],
        _ => &["mean", "stddev"],
    };
    for (p, name) in t.func.params.iter().zip(names) {
        check_param(p, name, size)?;
    }
    Ok(())
}

/// # Safety
/// `info` is NULL or points to a writable task info.
unsafe fn random_num(
    info: *mut AclrtRandomNumTaskInfo,
    stream: *mut c_void,
    reserve: *mut c_void,
) -> R {
    // 1. The ACL layer.
    non_null(info, "taskInfo")?;
    // SAFETY: non-NULL, and the caller's promise above.
    let acl_type = unsafe { (*info).data_type };
    let Some(rt) = rt_type(acl_type) else {
        return err(
            ACL_ERROR_INVALID_PARAM,
            format!("data type {acl_type} is not supported by aclrtRandomNumAsync"),
        );
    };
    // The runtime's ACL layer stores its own type number into the caller's task info.
    // SAFETY: as above; the runtime writes this field the same way.
    unsafe { (*info).data_type = rt };
    // SAFETY: as above.
    let t = unsafe { *info };
    // 2. The runtime layer: the chip's feature, the stream object, `reserve`.
    if product() != Product::A2 {
        return err(
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            "the random-number task needs an Atlas A2/A3 product",
        );
    }
    if !stream.is_null() {
        crate::registry::stream_of(stream)?;
    }
    if !reserve.is_null() {
        return err(ACL_ERROR_RT_PARAM_INVALID, "reserve must be NULL");
    }
    // 3. Context and stream.
    let s = crate::stream::enqueue_stream(stream)?;
    // 4. The task info.
    check_task(&t, rt)?;
    let Some(ty) = rt_float(rt) else {
        return err(
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
            "integer uniform random numbers are not modelled by the simulator",
        );
    };
    s.push(Task::Ext(Arc::new(RandomTask { info: t, ty })))
}

/// `aclError aclrtRandomNumAsync(const aclrtRandomNumTaskInfo* taskInfo, aclrtStream stream,
/// void* reserve)`: see the module documentation.
///
/// The C prototype's pointer is `const`, but the runtime writes `dataType` through it: the
/// pointer is `*mut` here (the same ABI).
///
/// # Safety
/// `taskInfo` is NULL or points to a writable `aclrtRandomNumTaskInfo` (the call rewrites its
/// `dataType`); its result, counter and address parameters stay valid until the task ran.
#[no_mangle]
pub unsafe extern "C" fn aclrtRandomNumAsync(
    task_info: *mut AclrtRandomNumTaskInfo,
    stream: *mut c_void,
    reserve: *mut c_void,
) -> i32 {
    // SAFETY: the caller's promise above.
    ffi("aclrtRandomNumAsync", true, || unsafe {
        random_num(task_info, stream, reserve)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_header() {
        // acl_rt.h: aclrtRandomParaInfo {u8, u8[8], u8, u8[6]}; the function info: an enum
        // and a union of at most two parameters; the task info on LP64.
        assert_eq!(std::mem::size_of::<AclrtRandomParaInfo>(), 16);
        assert_eq!(std::mem::size_of::<AclrtRandomNumFuncParaInfo>(), 36);
        assert_eq!(std::mem::size_of::<AclrtRandomNumTaskInfo>(), 104);
        assert_eq!(
            std::mem::offset_of!(AclrtRandomNumTaskInfo, random_para_addr),
            40
        );
        assert_eq!(
            std::mem::offset_of!(AclrtRandomNumTaskInfo, random_seed),
            64
        );
        assert_eq!(std::mem::offset_of!(AclrtRandomNumTaskInfo, rsv), 96);
    }
}
