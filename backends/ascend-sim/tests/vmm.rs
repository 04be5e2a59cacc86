//! Virtual memory: a handle mapped twice shows the same bytes, copies reach a mapped range,
//! and the runtime's codes for bad input (NULL and flags: 100000; unaligned, outside a
//! reservation, over a mapping, unknown pointers, a release with mappings: 107000).

mod common;
use ascendcl::codes::*;
use ascendcl::*;
use std::ffi::c_void;
use std::ptr::{null, null_mut};

fn prop() -> PhysicalMemProp {
    PhysicalMemProp {
        handle_type: 0,
        allocation_type: 0,
        mem_attr: 4,
        location_id: 0,
        location_type: 1,
        reserve: 0,
    }
}

#[test]
fn mappings_alias_and_bad_input_gets_the_runtime_codes() {
    let _g = common::shared();
    // SAFETY: valid out-pointers, or NULL on purpose; mapped memory is touched only while
    // mapped, within its size.
    unsafe {
        let mut p = prop();
        let mut g = 0usize;
        assert_eq!(aclrtMemGetAllocationGranularity(&mut p, 0, &mut g), 0);
        assert_eq!(g, GRANULARITY);
        assert_eq!(
            aclrtMemGetAllocationGranularity(null_mut(), 0, &mut g),
            ACL_ERROR_INVALID_PARAM
        );
        let mut va: *mut c_void = null_mut();
        assert_eq!(
            aclrtReserveMemAddress(null_mut(), 4 * g, 0, null_mut(), 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtReserveMemAddress(&mut va, 0, 0, null_mut(), 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtReserveMemAddress(&mut va, 4 * g, 0, null_mut(), 2),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtReserveMemAddress(&mut va, g + 1, 0, null_mut(), 0),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(aclrtReserveMemAddress(&mut va, 4 * g, 0, null_mut(), 0), 0);
        assert_eq!(
            va as usize % g,
            0,
            "reservation not aligned to the granularity"
        );
        let mut h: *mut c_void = null_mut();
        assert_eq!(
            aclrtMallocPhysical(&mut h, g, null(), 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtMallocPhysical(&mut h, g, &p, 1),
            ACL_ERROR_INVALID_PARAM
        );
        let mut bad = prop();
        bad.handle_type = 2;
        assert_eq!(
            aclrtMallocPhysical(&mut h, g, &bad, 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtMallocPhysical(&mut h, g / 2, &p, 0),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(aclrtMallocPhysical(&mut h, g, &p, 0), 0);
        let at = |k: usize| (va as *mut u8).add(k * g) as *mut c_void;
        assert_eq!(aclrtMapMem(at(0), g, 0, h, 1), ACL_ERROR_INVALID_PARAM);
        assert_eq!(
            aclrtMapMem(at(4), g, 0, h, 0),
            ACL_ERROR_RT_PARAM_INVALID,
            "outside"
        );
        assert_eq!(aclrtMapMem(at(0), g, 0, h, 0), 0);
        assert_eq!(
            aclrtMapMem(at(0), g, 0, h, 0),
            ACL_ERROR_RT_PARAM_INVALID,
            "over a mapping"
        );
        assert_eq!(aclrtMapMem(at(3), g, 0, h, 0), 0, "the same handle again");
        let mut d = MemAccessDesc {
            flags: 3,
            location_id: 0,
            location_type: 1,
            rsv: [0; 12],
        };
        assert_eq!(
            aclrtMemSetAccess(at(1), g, &mut d, 1),
            ACL_ERROR_RT_PARAM_INVALID,
            "unmapped"
        );
        assert_eq!(aclrtMemSetAccess(at(0), g, &mut d, 1), 0);
        assert_eq!(aclrtMemSetAccess(at(3), g, &mut d, 1), 0);
        // A copy into the first mapping shows at the second.
        let data: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(
            aclrtMemcpy(at(0), g, data.as_ptr() as *const c_void, data.len(), 1),
            0
        );
        let second = std::slice::from_raw_parts(at(3) as *const u8, data.len());
        assert_eq!(second, &data[..], "the second mapping shows other bytes");
        assert_eq!(
            aclrtFree(at(0)),
            ACL_ERROR_RT_PARAM_INVALID,
            "aclrtFree of a mapping"
        );
        assert_eq!(
            aclrtReleaseMemAddress(va),
            ACL_ERROR_RT_PARAM_INVALID,
            "release with mappings"
        );
        // Freed while mapped: the memory stays until its last mapping goes.
        assert_eq!(aclrtFreePhysical(h), 0);
        assert_eq!(
            aclrtFreePhysical(h),
            ACL_ERROR_RT_PARAM_INVALID,
            "freed twice"
        );
        assert_eq!(second[7], data[7]);
        assert_eq!(aclrtUnmapMem(at(3)), 0);
        assert_eq!(
            aclrtUnmapMem(at(3)),
            ACL_ERROR_RT_PARAM_INVALID,
            "unmapped twice"
        );
        assert_eq!(
            aclrtUnmapMem(at(1)),
            ACL_ERROR_RT_PARAM_INVALID,
            "never mapped"
        );
        assert_eq!(aclrtUnmapMem(at(0)), 0);
        assert_eq!(aclrtReleaseMemAddress(va), 0);
        assert_eq!(
            aclrtReleaseMemAddress(va),
            ACL_ERROR_RT_PARAM_INVALID,
            "released twice"
        );
    }
}
