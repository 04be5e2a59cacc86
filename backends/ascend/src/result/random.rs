//! `aclrtRandomNumAsync`: the runtime's built-in random-number task.
//!
//! The C prototype takes `const aclrtRandomNumTaskInfo*`, but the runtime's ACL layer writes
//! its own type number into `dataType` through it; the table declares the pointer `*mut`
//! and every call passes a task info of its own, built for that call.

use std::ffi::c_void;

use xstream_core::{Distribution, RandomFill, Result};

use super::{check, opt};
use crate::sys::{aclrtRandomNumTaskInfo, aclrtRandomParaInfo, AclFns, RawStream};

/// `ACL_ERROR_RT_PARAM_INVALID`.
const RT_PARAM_INVALID: i32 = 107_000;

/// A parameter by value: the first `bytes.len()` (at most 8) bytes.
fn value(bytes: &[u8]) -> aclrtRandomParaInfo {
    let n = bytes.len().min(8);
    let mut p = aclrtRandomParaInfo {
        size: n as u8,
        ..Default::default()
    };
    p.valueOrAddr[..n].copy_from_slice(&bytes[..n]);
    p
}

/// The task info of `fill` over `num` elements (mask bits for a mask) into `result`, with
/// the counter at `counter` and the parameters by value in the element type.
pub(crate) fn task_info(
    fill: &RandomFill,
    num: u64,
    result: *mut c_void,
    counter: *mut c_void,
) -> aclrtRandomNumTaskInfo {
    let size = fill.ty.size();
    let enc = |x: f32| value(&fill.ty.encode(f64::from(x))[..size]);
    let (a, b) = fill.dist.params();
    let mut t = aclrtRandomNumTaskInfo {
        dataType: fill.ty.acl(),
        randomNumFuncParaInfo: Default::default(),
        randomParaAddr: std::ptr::null_mut(),
        randomResultAddr: result,
        randomCounterAddr: counter,
        randomSeed: value(&fill.seed.to_le_bytes()),
        randomNum: value(&num.to_le_bytes()),
        rsv: [0; 8],
    };
    t.randomNumFuncParaInfo.funcType = fill.dist.acl();
    t.randomNumFuncParaInfo.paramInfo[0] = enc(a);
    if let Some(b) = b {
        t.randomNumFuncParaInfo.paramInfo[1] = enc(b);
    }
    t
}

/// Enqueues `fill` over `num` elements into `result` on `s`, the counter read from `counter`
/// (16 bytes of device memory) when the task runs.
pub(crate) fn random_num_async(
    t: &AclFns,
    fill: &RandomFill,
    num: u64,
    result: *mut c_void,
    counter: *mut c_void,
    s: RawStream,
) -> Result<()> {
    let f = opt(t.aclrtRandomNumAsync, "aclrtRandomNumAsync")?;
    let mut info = task_info(fill, num, result, counter);
    // SAFETY: `info` is a live local the call may write; the result range and the counter are
    // live device memory of the stream's device that the caller keeps alive until the task
    // ran; `s` is a live stream of the current context; the reserved argument is NULL.
    let code = unsafe { f(&mut info, s.0, std::ptr::null_mut()) };
    check(t, "aclrtRandomNumAsync", code)
}

/// Whether the chip has the task (the runtime's feature `RT_FEATURE_TASK_RAND_GENERATOR`,
/// Atlas A2/A3). A task info with NULL result and counter addresses passes the ACL layer and
/// the chip check, then fails the runtime's task check with 107000 without enqueueing
/// anything; a chip without the task answers 207000 first.
pub(crate) fn chip_has_task(t: &AclFns) -> bool {
    let Some(f) = t.aclrtRandomNumAsync else {
        return false;
    };
    let fill = RandomFill::new(
        Distribution::Uniform { min: 0.0, max: 1.0 },
        xstream_core::RandomType::F32,
        0,
    );
    let mut info = task_info(&fill, 1, std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: `info` is a live local; the NULL addresses are refused before any task is
    // built; the NULL stream is the current context's default stream.
    let code = unsafe { f(&mut info, std::ptr::null_mut(), std::ptr::null_mut()) };
    code == RT_PARAM_INVALID
}

#[cfg(test)]
mod tests {
    use super::*;
    use xstream_core::RandomType;

    #[test]
    fn task_info_layout_and_encoding() {
        let fill = RandomFill::new(
            Distribution::Normal {
                mean: 1.5,
                std: 0.25,
            },
            RandomType::F16,
            0x0102_0304_0506_0708,
        );
        let t = task_info(&fill, 96, 0x1000 as *mut c_void, 0x2000 as *mut c_void);
        // SAFETY: plain old data of 104 bytes.
        let bytes: [u8; 104] = unsafe { std::mem::transmute(t) };
        assert_eq!(
            i32::from_le_bytes(bytes[0..4].try_into().unwrap()),
            1,
            "ACL_FLOAT16"
        );
        assert_eq!(
            u32::from_le_bytes(bytes[4..8].try_into().unwrap()),
            2,
            "NORMAL_DIS"
        );
        // mean: isAddr 0, f16 1.5 = 0x3E00, size 2.
        assert_eq!(bytes[8], 0);
        assert_eq!(&bytes[9..11], &0x3E00u16.to_le_bytes());
        assert_eq!(bytes[17], 2);
        // stddev at 8 + 16: f16 0.25 = 0x3400.
        assert_eq!(&bytes[25..27], &0x3400u16.to_le_bytes());
        assert_eq!(
            u64::from_le_bytes(bytes[48..56].try_into().unwrap()),
            0x1000
        );
        assert_eq!(
            u64::from_le_bytes(bytes[56..64].try_into().unwrap()),
            0x2000
        );
        // seed: 8 bytes at 65, size at 73; num at 81, size at 89.
        assert_eq!(
            u64::from_le_bytes(bytes[65..73].try_into().unwrap()),
            fill.seed
        );
        assert_eq!(bytes[73], 8);
        assert_eq!(u64::from_le_bytes(bytes[81..89].try_into().unwrap()), 96);
    }
}
