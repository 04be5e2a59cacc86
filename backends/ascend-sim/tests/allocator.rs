//! ABI tests of the ACL simulator through the rlib. The external per-stream allocator registry.

mod common;

use ascendcl::codes::*;
use ascendcl::*;
use common::*;
use std::ffi::c_void;
use std::ptr::null_mut;

unsafe extern "C" fn fake_alloc(_a: *mut c_void, _n: usize) -> *mut c_void {
    null_mut()
}
unsafe extern "C" fn fake_free(_a: *mut c_void, _b: *mut c_void) {}
unsafe extern "C" fn fake_addr(b: *mut c_void) -> *mut c_void {
    b
}

#[test]
fn allocator_registry() {
    let _g = shared();
    let s = stream();
    // SAFETY: valid out-pointers; handles from the simulator.
    unsafe {
        let d = aclrtAllocatorCreateDesc();
        assert!(!d.is_null());
        assert_eq!(aclrtAllocatorRegister(s, d), ACL_ERROR_INVALID_PARAM);
        let obj = 0x1234usize as *mut c_void;
        assert_eq!(aclrtAllocatorSetObjToDesc(d, obj), 0);
        assert_eq!(aclrtAllocatorSetAllocFuncToDesc(d, Some(fake_alloc)), 0);
        assert_eq!(aclrtAllocatorSetFreeFuncToDesc(d, Some(fake_free)), 0);
        assert_eq!(
            aclrtAllocatorRegister(s, d),
            ACL_ERROR_INVALID_PARAM,
            "getAddr missing"
        );
        assert_eq!(
            aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, Some(fake_addr)),
            0
        );
        assert_eq!(
            aclrtAllocatorRegister(null_mut(), d),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtAllocatorRegister(s, d), 0);
        // Later desc edits do not affect the registration.
        assert_eq!(aclrtAllocatorSetObjToDesc(d, null_mut()), 0);
        let mut od = null_mut();
        let mut oo = null_mut();
        let mut advise: AclrtAllocatorAllocAdviseFunc = Some(std::mem::transmute::<
            usize,
            unsafe extern "C" fn(*mut c_void, usize, *mut c_void) -> *mut c_void,
        >(1));
        let mut ga: AclrtAllocatorGetAddrFromBlockFunc = None;
        assert_eq!(
            aclrtAllocatorGetByStream(
                s,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut()
            ),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtAllocatorGetByStream(
                s,
                &mut od,
                &mut oo,
                null_mut(),
                null_mut(),
                &mut advise,
                &mut ga
            ),
            0
        );
        assert_eq!(od, d);
        assert_eq!(oo, obj);
        assert!(advise.is_none());
        assert_eq!(
            ga.map(|f| f as *const () as usize),
            Some(fake_addr as *const () as usize)
        );
        let other = stream();
        assert_eq!(
            aclrtAllocatorGetByStream(
                other,
                &mut od,
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut(),
                null_mut()
            ),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtAllocatorUnregister(null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(aclrtAllocatorUnregister(s), 0);
        assert_eq!(aclrtAllocatorUnregister(s), 0);
        assert_eq!(aclrtAllocatorUnregister(other), 0);
        assert_eq!(aclrtAllocatorDestroyDesc(d), 0);
        assert_eq!(
            aclrtAllocatorDestroyDesc(null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        destroy(other);
    }
    destroy(s);
    teardown();
}
