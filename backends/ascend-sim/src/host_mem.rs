//! Page-locked versus pageable host memory. `aclrtMallocHost` blocks are recorded here as
//! page-locked; any other host address is pageable. The runtime's rule modelled: host memory
//! in an asynchronous copy that is captured (between `aclmdlRICaptureBegin` and
//! `aclmdlRICaptureEnd`) must be page-locked, so a captured host-to-device or device-to-host
//! copy whose host side is pageable is refused (`ACL_ERROR_INVALID_PARAM`, the code this
//! simulator chooses) and the copy is not recorded.

use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock};

use crate::codes::ACL_ERROR_INVALID_PARAM;
use crate::error::{err, lock, R};

/// `ACL_MEMCPY_HOST_TO_DEVICE`.
const H2D: i32 = 1;
/// `ACL_MEMCPY_DEVICE_TO_HOST`.
const D2H: i32 = 2;

/// Page-locked blocks: start address → length.
fn pinned() -> &'static Mutex<BTreeMap<usize, usize>> {
    static P: OnceLock<Mutex<BTreeMap<usize, usize>>> = OnceLock::new();
    P.get_or_init(Default::default)
}

/// Records a block from `aclrtMallocHost`.
pub(crate) fn add(p: usize, len: usize) {
    lock(pinned()).insert(p, len);
}

/// Forgets a block at `aclrtFreeHost`.
pub(crate) fn remove(p: usize) {
    lock(pinned()).remove(&p);
}

/// Whether `p .. p + n` lies inside one page-locked block.
pub(crate) fn is_page_locked(p: usize, n: usize) -> bool {
    let g = lock(pinned());
    g.range(..=p)
        .next_back()
        .is_some_and(|(&start, &len)| p.checked_add(n).is_some_and(|end| end <= start + len))
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
            ACL_ERROR_INVALID_PARAM,
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
}
