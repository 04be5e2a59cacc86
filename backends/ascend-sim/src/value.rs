//! Stream value operations: `aclrtValueWait` / `aclrtValueWrite`.
//!
//! Both are stream-ordered tasks on a 64-bit word of memory (8-byte aligned, else 100000).
//! `aclrtValueWrite` stores `value` (its `flag` is reserved and must be 0, else 100000).
//! `aclrtValueWait` blocks the stream until the word satisfies the comparison `flag`
//! (other values → 100000), re-reading the word until then:
//!
//! | Flag | Value | Unblocks when |
//! | --- | --- | --- |
//! | `ACL_VALUE_WAIT_GEQ` | 0 | `(int64_t)(*addr - value) >= 0` (wrapping; A2: `(int64_t)*addr >= (int64_t)value`, below) |
//! | `ACL_VALUE_WAIT_EQ` | 1 | `*addr == value` |
//! | `ACL_VALUE_WAIT_AND` | 2 | `(*addr & value) != 0` |
//! | `ACL_VALUE_WAIT_NOR` | 3 | `~(*addr \| value) != 0` |
//!
//! GEQ on `a2`: the ACL documentation gives the wrapping difference above, but the runtime for
//! the STARS chips builds the wait as a condition program whose test is a signed branch of the
//! word against the value (`ConvertConditionToOpAndBranchFunc`: GEQ → `BGE` of `*addr | 0` and
//! `value`, `core/src/task/stars_cond_isa_helper.cc`). The two agree unless the difference
//! crosses 2^63 (for example `*addr` = `i64::MAX`, `value` = `u64::MAX`: documented false,
//! signed true); the simulator follows the runtime's program there.
//!
//! The word may be written by another stream (`aclrtValueWrite`, a copy) or by the host. A wait
//! ends early when the stream is aborted or force-destroyed, or when its context is poisoned;
//! it is skipped on a poisoned context, like every device task. Both calls are captured into a
//! model run instance like other tasks.

use crate::codes::*;
use crate::error::*;
use crate::stream::*;
use crate::task::*;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

/// `ACL_VALUE_WAIT_GEQ`.
pub const ACL_VALUE_WAIT_GEQ: u32 = 0;
/// `ACL_VALUE_WAIT_EQ`.
pub const ACL_VALUE_WAIT_EQ: u32 = 1;
/// `ACL_VALUE_WAIT_AND`.
pub const ACL_VALUE_WAIT_AND: u32 = 2;
/// `ACL_VALUE_WAIT_NOR`.
pub const ACL_VALUE_WAIT_NOR: u32 = 3;

/// Whether `cur` satisfies the wait condition `flag` against `value` on the current product.
pub(crate) fn satisfied(cur: u64, value: u64, flag: u32) -> bool {
    satisfied_on(crate::config::product(), cur, value, flag)
}

/// [`satisfied`] for product `p` (GEQ is a signed comparison on `a2`, see the module notes).
fn satisfied_on(p: crate::config::Product, cur: u64, value: u64, flag: u32) -> bool {
    match flag {
        ACL_VALUE_WAIT_GEQ if p == crate::config::Product::A2 => (cur as i64) >= (value as i64),
        ACL_VALUE_WAIT_GEQ => (cur.wrapping_sub(value) as i64) >= 0,
        ACL_VALUE_WAIT_EQ => cur == value,
        ACL_VALUE_WAIT_AND => cur & value != 0,
        _ => !(cur | value) != 0,
    }
}

struct ValueTask {
    addr: usize,
    value: u64,
    /// `Some(flag)` waits, `None` writes.
    wait: Option<u32>,
}

impl ValueTask {
    fn word(&self) -> &AtomicU64 {
        // SAFETY: the caller of aclrtValueWait/Write promised an 8-byte aligned word (checked)
        // that stays valid until the task ran; other writers use atomic or copy stores.
        unsafe { &*(self.addr as *const AtomicU64) }
    }
}

impl ExtTask for ValueTask {
    fn run(&self, stream: &Stream, epoch: u64) {
        let Some(flag) = self.wait else {
            self.word().store(self.value, SeqCst);
            return;
        };
        let mut pause = Duration::from_micros(1);
        while !satisfied(self.word().load(SeqCst), self.value, flag) {
            if stream.cancelled(epoch) || stream.ctx.poisoned() != 0 {
                return;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }
}

fn push(addr: *mut c_void, value: u64, wait: Option<u32>, stream: *mut c_void) -> R {
    non_null(addr, "devAddr")?;
    if !(addr as usize).is_multiple_of(8) {
        return err(ACL_ERROR_INVALID_PARAM, "devAddr must be 8-byte aligned");
    }
    let s = enqueue_stream(stream)?;
    s.push(Task::Ext(Arc::new(ValueTask {
        addr: addr as usize,
        value,
        wait,
    })))
}

/// `aclError aclrtValueWait(void* devAddr, uint64_t value, uint32_t flag, aclrtStream
/// stream)`: blocks `stream` until the 64-bit word at `devAddr` satisfies `flag`.
///
/// # Safety
/// `dev_addr` must point to 8 valid bytes until the wait has completed.
#[no_mangle]
pub unsafe extern "C" fn aclrtValueWait(
    dev_addr: *mut c_void,
    value: u64,
    flag: u32,
    stream: *mut c_void,
) -> i32 {
    ffi("aclrtValueWait", true, || {
        if flag > ACL_VALUE_WAIT_NOR {
            return err(
                ACL_ERROR_INVALID_PARAM,
                format!("bad value-wait flag {flag}"),
            );
        }
        push(dev_addr, value, Some(flag), stream)
    })
}

/// `aclError aclrtValueWrite(void* devAddr, uint64_t value, uint32_t flag, aclrtStream
/// stream)`: writes `value` to the 64-bit word at `devAddr` in stream order; `flag` must be 0.
///
/// # Safety
/// `dev_addr` must point to 8 valid bytes until the write has executed.
#[no_mangle]
pub unsafe extern "C" fn aclrtValueWrite(
    dev_addr: *mut c_void,
    value: u64,
    flag: u32,
    stream: *mut c_void,
) -> i32 {
    ffi("aclrtValueWrite", true, || {
        if flag != 0 {
            return err(ACL_ERROR_INVALID_PARAM, "value-write flag is reserved (0)");
        }
        push(dev_addr, value, None, stream)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparisons() {
        assert!(satisfied(5, 5, ACL_VALUE_WAIT_GEQ));
        assert!(satisfied(6, 5, ACL_VALUE_WAIT_GEQ));
        assert!(!satisfied(4, 5, ACL_VALUE_WAIT_GEQ));
        // Wrapping: 1 is "after" u64::MAX.
        assert!(satisfied(1, u64::MAX, ACL_VALUE_WAIT_GEQ));
        assert!(satisfied(7, 7, ACL_VALUE_WAIT_EQ) && !satisfied(8, 7, ACL_VALUE_WAIT_EQ));
        assert!(satisfied(0b110, 0b010, ACL_VALUE_WAIT_AND));
        assert!(!satisfied(0b100, 0b010, ACL_VALUE_WAIT_AND));
        assert!(satisfied(0, 0, ACL_VALUE_WAIT_NOR));
        assert!(!satisfied(u64::MAX, 0, ACL_VALUE_WAIT_NOR));
    }

    #[test]
    fn geq_is_signed_on_a2_and_wrapping_elsewhere() {
        use crate::config::Product;
        let (max, m1, min) = (i64::MAX as u64, u64::MAX, 1u64 << 63);
        // Where the difference crosses 2^63 the two readings disagree.
        assert!(satisfied_on(Product::A2, max, m1, ACL_VALUE_WAIT_GEQ));
        assert!(!satisfied_on(Product::T910, max, m1, ACL_VALUE_WAIT_GEQ));
        assert!(!satisfied_on(Product::A2, min, 1, ACL_VALUE_WAIT_GEQ));
        assert!(satisfied_on(Product::P310, min, 1, ACL_VALUE_WAIT_GEQ));
        // A counter wrapping past the top is "after" it under both.
        for p in [Product::A2, Product::T910, Product::P310] {
            assert!(satisfied_on(p, 1, u64::MAX, ACL_VALUE_WAIT_GEQ));
            assert!(!satisfied_on(p, u64::MAX - 1, u64::MAX, ACL_VALUE_WAIT_GEQ));
        }
    }
}
