//! `aclrtIpcGetEventHandle` / `aclrtIpcOpenEventHandle` on the simulated chip switched to one
//! without IPC (`xsimSetIpc(0)`, as `XSIM_IPC=0`): the ACL-layer NULL checks (100000), then the
//! feature refusal (207000) before the event or the handle bytes are looked at, as the runtime
//! does on such a chip. The default A2 has IPC events and IPC memory.

mod common;
use ascendcl::codes::*;
use ascendcl::*;
use std::ffi::c_void;
use std::ptr::null_mut;

#[test]
fn ipc_event_handles_are_refused_on_a_chip_without_ipc_events() {
    let _g = common::exclusive();
    // SAFETY: no pointer arguments.
    assert_eq!(unsafe { xsimSetIpc(0) }, 0);
    let mut ev: *mut c_void = null_mut();
    // SAFETY: valid out-pointer.
    assert_eq!(unsafe { aclrtCreateEvent(&mut ev) }, 0);
    let mut h = AclrtIpcEventHandle { reserved: [0; 64] };
    // SAFETY: every pointer is valid or NULL on purpose.
    unsafe {
        assert_eq!(
            aclrtIpcGetEventHandle(ev, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtIpcGetEventHandle(null_mut(), &mut h),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtIpcGetEventHandle(ev, &mut h),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        // Not even an event: the chip check comes first.
        let bogus = 0x1234usize as *mut c_void;
        assert_eq!(
            aclrtIpcGetEventHandle(bogus, &mut h),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(
            aclrtIpcOpenEventHandle(h, null_mut()),
            ACL_ERROR_INVALID_PARAM
        );
        let mut opened: *mut c_void = null_mut();
        assert_eq!(
            aclrtIpcOpenEventHandle(h, &mut opened),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert!(opened.is_null());
        assert_eq!(aclrtDestroyEvent(ev), 0);
        // Without XSIM_IPC the product has no IPC memory either: NULL checks, argument
        // checks, then 207000.
        let mut p: *mut c_void = null_mut();
        assert_eq!(aclrtMalloc(&mut p, 64, 0), 0);
        let mut key = [0 as std::ffi::c_char; 65];
        assert_eq!(
            aclrtIpcMemGetExportKey(p, 64, null_mut(), 65, 0),
            ACL_ERROR_INVALID_PARAM
        );
        assert_eq!(
            aclrtIpcMemGetExportKey(p, 64, key.as_mut_ptr(), 65, 7),
            ACL_ERROR_RT_PARAM_INVALID
        );
        assert_eq!(
            aclrtIpcMemGetExportKey(p, 64, key.as_mut_ptr(), 65, 0),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        let k = c"xsim-1-2-3";
        let mut pid = [1i32];
        assert_eq!(
            aclrtIpcMemSetImportPid(k.as_ptr(), pid.as_mut_ptr(), 1),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        let mut d: *mut c_void = null_mut();
        assert_eq!(
            aclrtIpcMemImportByKey(&mut d, k.as_ptr(), 0),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(
            aclrtIpcMemClose(k.as_ptr()),
            ACL_ERROR_RT_FEATURE_NOT_SUPPORT
        );
        assert_eq!(aclrtFree(p), 0);
        assert_eq!(xsimSetIpc(5), ACL_ERROR_INVALID_PARAM);
        // Back to the default: an A2 has IPC events and IPC memory (unless XSIM_IPC=0).
        assert_eq!(xsimSetIpc(-1), 0);
        if std::env::var_os("XSIM_IPC").is_none() {
            let mut ipc: *mut c_void = null_mut();
            assert_eq!(aclrtCreateEventExWithFlag(&mut ipc, ACL_EVENT_IPC), 0);
            assert_eq!(aclrtIpcGetEventHandle(ipc, &mut h), 0);
            assert_eq!(aclrtDestroyEvent(ipc), 0);
            let mut p: *mut c_void = null_mut();
            assert_eq!(aclrtMalloc(&mut p, 64, 0), 0);
            assert_eq!(aclrtIpcMemGetExportKey(p, 64, key.as_mut_ptr(), 65, 0), 0);
            assert_eq!(aclrtFree(p), 0);
        }
    }
}
