//! Page-locked versus pageable host memory. `aclrtMallocHost` blocks and ranges registered
//! with `aclrtHostRegister` are recorded here as page-locked; any other host address is
//! pageable. The runtime's rule modelled: host memory
//! in an asynchronous copy that is captured (between `aclmdlRICaptureBegin` and
//! `aclmdlRICaptureEnd`) must be page-locked, so a captured host-to-device or device-to-host
//! copy whose host side is pageable is refused with 107000 (`ACL_ERROR_RT_PARAM_INVALID`: the
//! runtime's `RT_ERROR_INVALID_VALUE` for a pageable copy on a capturing stream in
//! `ApiErrorDecorator::MemcpyAsync`, `hicann/runtime` `src/runtime/api/impl/api_error.cc`) and
//! the copy is not recorded.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use crate::codes::{ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_PARAM_INVALID};
use crate::error::{err, lock, R};

/// `ACL_MEMCPY_HOST_TO_DEVICE`.
const H2D: i32 = 1;
/// `ACL_MEMCPY_DEVICE_TO_HOST`.
const D2H: i32 = 2;

/// How a page-locked range came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// `aclrtMallocHost`.
    Allocated,
    /// `aclrtHostRegister`.
    Registered,
}

/// Page-locked ranges: start address → (length, origin).
fn pinned() -> &'static Mutex<BTreeMap<usize, (usize, Origin)>> {
    static P: OnceLock<Mutex<BTreeMap<usize, (usize, Origin)>>> = OnceLock::new();
    P.get_or_init(Default::default)
}

/// Records a block from `aclrtMallocHost`.
pub(crate) fn add(p: usize, len: usize) {
    lock(pinned()).insert(p, (len, Origin::Allocated));
}

/// Forgets a block at `aclrtFreeHost`.
pub(crate) fn remove(p: usize) {
    let mut g = lock(pinned());
    if g.get(&p).is_some_and(|&(_, o)| o == Origin::Allocated) {
        g.remove(&p);
    }
}

/// Whether `p .. p + n` lies inside one page-locked range.
pub(crate) fn is_page_locked(p: usize, n: usize) -> bool {
    let g = lock(pinned());
    g.range(..=p)
        .next_back()
        .is_some_and(|(&start, &(len, _))| p.checked_add(n).is_some_and(|end| end <= start + len))
}

/// The page size `aclrtHostRegister` requires its address to be aligned to.
pub(crate) const REGISTER_ALIGN: usize = 4096;

/// Records `p .. p + len` as registered: `p` page-aligned, `len > 0`, the range overlapping
/// no page-locked range (each broken rule → 100000).
pub(crate) fn register(p: usize, len: usize) -> R {
    if len == 0 {
        return err(ACL_ERROR_INVALID_PARAM, "size is 0");
    }
    if !p.is_multiple_of(REGISTER_ALIGN) {
        return err(
            ACL_ERROR_INVALID_PARAM,
            "the host address must be aligned to a 4 KiB page",
        );
    }
    let Some(end) = p.checked_add(len) else {
        return err(ACL_ERROR_INVALID_PARAM, "the range wraps the address space");
    };
    let mut g = lock(pinned());
    let overlaps = g
        .range(..end)
        .next_back()
        .is_some_and(|(&start, &(l, _))| start + l > p);
    if overlaps {
        return err(
            ACL_ERROR_INVALID_PARAM,
            "the range overlaps page-locked or already registered host memory",
        );
    }
    g.insert(p, (len, Origin::Registered));
    Ok(())
}

/// Forgets a registration made at `p` (→ 100000 when `p` does not start one).
pub(crate) fn unregister(p: usize) -> R {
    let mut g = lock(pinned());
    if g.get(&p).is_some_and(|&(_, o)| o == Origin::Registered) {
        g.remove(&p);
        Ok(())
    } else {
        err(
            ACL_ERROR_INVALID_PARAM,
            "the address does not start a range registered with aclrtHostRegister",
        )
    }
}

/// The capture rule for `aclrtMemcpyAsync`.
pub(crate) fn check_captured_copy(kind: i32, dst: usize, src: usize, n: usize) -> R {
    let host = match kind {
        H2D => src,
        D2H => dst,
        _ => return Ok(()),
    };
    if is_page_locked(host, n) {
        Ok(())
    } else {
        err(
            ACL_ERROR_RT_PARAM_INVALID,
            "a captured asynchronous copy needs page-locked host memory (aclrtMallocHost); \
             this host range is pageable",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_inside_a_block_are_page_locked() {
        add(0x10_000, 0x100);
        assert!(is_page_locked(0x10_000, 0x100));
        assert!(is_page_locked(0x10_080, 0x80));
        assert!(!is_page_locked(0x10_080, 0x81));
        assert!(!is_page_locked(0xF_FFF, 1));
        assert!(check_captured_copy(H2D, 0, 0x10_000, 16).is_ok());
        assert!(check_captured_copy(D2H, 0x20_000, 0, 16).is_err());
        assert!(check_captured_copy(3, 0x20_000, 0x30_000, 16).is_ok());
        remove(0x10_000);
        assert!(!is_page_locked(0x10_000, 1));
    }

    #[test]
    fn registered_ranges_are_page_locked_until_unregistered() {
        let p = 0x4000_0000;
        assert!(register(p + 1, 16).is_err(), "unaligned");
        assert!(register(p, 0).is_err(), "empty");
        assert!(register(p, 0x2000).is_ok());
        assert!(is_page_locked(p + 0x1000, 0x1000));
        assert!(register(p + 0x1000, 0x1000).is_err(), "overlap");
        remove(p);
        assert!(
            is_page_locked(p, 1),
            "aclrtFreeHost does not drop a registration"
        );
        assert!(unregister(p + 0x1000).is_err(), "not a range start");
        assert!(unregister(p).is_ok());
        assert!(!is_page_locked(p, 1));
        assert!(unregister(p).is_err(), "twice");
    }
}
