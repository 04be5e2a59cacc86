//! Driver functions the runtime's libraries link against but that this emulation does not
//! provide: each answers `DRV_ERROR_NOT_SUPPORT` and fills nothing (host-device channels, queues,
//! shared memory, profiling channels, …). They exist so that the runtime's libraries load; the
//! runtime treats "not supported" as a refusal, never as success.
//!
//! On x86-64 a function that ignores its arguments can be called with any argument list, so one
//! body serves every prototype (all of these return `drvError_t` or `int`).

#![allow(non_snake_case)]

macro_rules! not_supported {
    ($($name:ident),* $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: not emulated; returns `DRV_ERROR_NOT_SUPPORT`.")]
            #[no_mangle]
            pub extern "C" fn $name() -> i32 {
                crate::trace!("{} (not emulated) -> NOT_SUPPORT", stringify!($name));
                crate::codes::DRV_ERROR_NOT_SUPPORT
            }
        )*
        /// Names of the functions answered with `DRV_ERROR_NOT_SUPPORT`.
        pub const NOT_EMULATED: &[&str] = &[$(stringify!($name)),*];
    };
}

not_supported!(
    drvHdcAddMsgBuffer,
    drvHdcAllocMsg,
    drvHdcClientCreate,
    drvHdcClientDestroy,
    drvHdcEpollClose,
    drvHdcEpollCreate,
    drvHdcEpollCtl,
    drvHdcEpollWait,
    drvHdcFreeMsg,
    drvHdcGetCapacity,
    drvHdcGetMsgBuffer,
    drvHdcReuseMsg,
    drvHdcServerCreate,
    drvHdcServerDestroy,
    drvHdcSessionAccept,
    drvHdcSessionClose,
    drvHdcSessionConnect,
    drvHdcSetSessionReference,
    halHdcGetSessionAttr,
    halHdcRecv,
    halHdcSend,
    halHdcSessionConnectEx,
);
