//! The raw ACL function table (`AclFns`): one `unsafe extern "C" fn` field per C symbol of
//! `libascendcl.so`, named exactly like the symbol.
//!
//! Required symbols (present in every CANN release xstream supports, 7.0.RC1 and later) are plain
//! fields; symbols that only newer releases export are `Option` fields, resolved lazily by name as
//! torch_npu does. The three `xsim*` fields are **simulator-only vendor extensions** exported by
//! the CPU test double `xstream-ascend-sim`; real CANN never has them, and xstream uses them only
//! to run [`Kernel`](xstream_core::Kernel)s and fault injection when present.
//!
//! The table is filled through a resolver closure from `&CStr` to a symbol address
//! ([`AclFns::load_with`]), so tests can pass fakes.
#![allow(unsafe_code)]
#![allow(non_snake_case)]
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void, CStr};

/// `aclError`.
pub type aclError = i32;
/// `aclrtCallback` / `aclrtHostFunc`: `void (*)(void*)`.
pub type aclrtCallback = unsafe extern "C" fn(*mut c_void);
/// `aclrtExceptionInfoCallback`: `void (*)(aclrtExceptionInfo*)`; the info is opaque and read
/// through the `aclrtGet*FromExceptionInfo` getters.
pub type aclrtExceptionInfoCallback = unsafe extern "C" fn(*mut c_void);
/// `aclrtAllocatorAllocFunc`.
pub type aclrtAllocatorAllocFunc = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
/// `aclrtAllocatorFreeFunc`.
pub type aclrtAllocatorFreeFunc = unsafe extern "C" fn(*mut c_void, *mut c_void);
/// `aclrtAllocatorAllocAdviseFunc`.
pub type aclrtAllocatorAllocAdviseFunc =
    unsafe extern "C" fn(*mut c_void, usize, *mut c_void) -> *mut c_void;
/// `aclrtAllocatorGetAddrFromBlockFunc`.
pub type aclrtAllocatorGetAddrFromBlockFunc = unsafe extern "C" fn(*mut c_void) -> *mut c_void;

/// C `aclrtStreamAttrValue` (a 16-byte union, align 8).
#[repr(C)]
#[derive(Clone, Copy)]
pub union aclrtStreamAttrValue {
    /// `failureMode` (`ACL_STREAM_ATTR_FAILURE_MODE`).
    pub failureMode: u64,
    /// `userCustomTag` (`ACL_STREAM_ATTR_USER_CUSTOM_TAG`).
    pub userCustomTag: u32,
    /// `streamPriority` (`ACL_STREAM_ATTR_PRIORITY`, CANN >= 9.1.0).
    pub streamPriority: u32,
    /// `reserve[4]`.
    pub reserve: [u32; 4],
}

const _: () = assert!(std::mem::size_of::<aclrtStreamAttrValue>() == 16);

/// `ACL_IPC_EVENT_HANDLE_SIZE` (`acl/acl_rt.h`): the bytes of an [`aclrtIpcEventHandle`].
pub const ACL_IPC_EVENT_HANDLE_SIZE: usize = 64;

/// C `aclrtIpcEventHandle` (`acl/acl_rt.h`): `{ char reserved[ACL_IPC_EVENT_HANDLE_SIZE]; }`,
/// passed **by value** to `aclrtIpcOpenEventHandle`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct aclrtIpcEventHandle {
    /// The opaque handle bytes.
    pub reserved: [c_char; ACL_IPC_EVENT_HANDLE_SIZE],
}

const _: () = assert!(std::mem::size_of::<aclrtIpcEventHandle>() == ACL_IPC_EVENT_HANDLE_SIZE);

/// C `aclrtBinaryLoadOptions` (`acl/acl_rt.h`): `{ aclrtBinaryLoadOption* options; size_t
/// numOpt; }`. xstream passes none (a NULL pointer); the type is declared for the prototype.
#[repr(C)]
#[derive(Debug)]
pub struct aclrtBinaryLoadOptions {
    /// `options` (`aclrtBinaryLoadOption*`, opaque here).
    pub options: *mut c_void,
    /// `numOpt`.
    pub numOpt: usize,
}

/// C `aclrtLaunchKernelAttr` (`acl/acl_rt.h`): an `aclrtLaunchKernelAttrId` and a 16-byte
/// `aclrtLaunchKernelAttrValue` union (20 bytes, align 4).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct aclrtLaunchKernelAttr {
    /// `id` (`aclrtLaunchKernelAttrId`).
    pub id: i32,
    /// `value` as its `uint32_t rsv[4]` member; `dynUBufSize` is `value[0]`.
    pub value: [u32; 4],
}

const _: () = assert!(std::mem::size_of::<aclrtLaunchKernelAttr>() == 20);

/// C `aclrtLaunchKernelCfg` (`acl/acl_rt.h`): `{ aclrtLaunchKernelAttr* attrs; size_t numAttrs;
/// }`.
#[repr(C)]
#[derive(Debug)]
pub struct aclrtLaunchKernelCfg {
    /// `attrs`.
    pub attrs: *mut aclrtLaunchKernelAttr,
    /// `numAttrs`.
    pub numAttrs: usize,
}

/// C `aclrtPhysicalMemProp` (`acl/acl_rt.h`): handle type, allocation type, memory
/// attribute, location (`aclrtMemLocation`: `uint32_t id; aclrtMemLocationType type;`), and a
/// reserved `uint64_t`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct aclrtPhysicalMemProp {
    /// `handleType` (`ACL_MEM_HANDLE_TYPE_NONE` 0).
    pub handleType: u32,
    /// `allocationType` (`ACL_MEM_ALLOCATION_TYPE_PINNED` 0).
    pub allocationType: u32,
    /// `memAttr` (`aclrtMemAttr`; `ACL_HBM_MEM_HUGE` 4).
    pub memAttr: u32,
    /// `location.id`: the device id.
    pub locationId: u32,
    /// `location.type` (`ACL_MEM_LOCATION_TYPE_DEVICE` 1).
    pub locationType: u32,
    /// `reserve`.
    pub reserve: u64,
}

/// C `aclrtMemAccessDesc` (`acl/acl_rt.h`): `aclrtMemAccessFlags flags; aclrtMemLocation
/// location; uint8_t rsv[12];`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct aclrtMemAccessDesc {
    /// `flags` (`ACL_RT_MEM_ACCESS_FLAGS_READWRITE` 3).
    pub flags: u32,
    /// `location.id`.
    pub locationId: u32,
    /// `location.type`.
    pub locationType: u32,
    /// `rsv`.
    pub rsv: [u8; 12],
}

/// C `aclrtErrorInfo` (`acl/acl_rt.h`): `uint8_t tryRepair; uint8_t hasDetail; uint8_t
/// reserved[2]; aclrtErrorType errorType;` then the 8-aligned `aclrtErrorInfoDetail` union
/// (2568 bytes: the memory-fault ranges, or `aclrtAicoreErrorType aicoreErrType` in its first
/// four bytes), 2576 bytes in all. The detail is kept as raw words here.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct aclrtErrorInfo {
    /// `tryRepair`: whether `aclrtRepairError` may repair the fault.
    pub tryRepair: u8,
    /// `hasDetail`: whether `detail` holds memory-fault ranges.
    pub hasDetail: u8,
    /// `reserved[2]`.
    pub reserved: [u8; 2],
    /// `errorType` (`aclrtErrorType`: 0 none, 1 memory, 2 L2, 3 AI Core, 4 link, 5 L3 port,
    /// 0xFFFF others).
    pub errorType: i32,
    /// `detail`, as raw 8-byte words.
    pub detail: [u64; 321],
}

const _: () = assert!(std::mem::size_of::<aclrtErrorInfo>() == 2576);

/// C `aclrtRandomParaInfo` (`acl/acl_rt.h`): `uint8_t isAddr; uint8_t valueOrAddr[8];
/// uint8_t size; uint8_t rsv[6];`: a parameter of the random-number task by value (`isAddr`
/// 0, `size` bytes) or by the 8-byte device address of its value (`isAddr` 1).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct aclrtRandomParaInfo {
    /// `isAddr`.
    pub isAddr: u8,
    /// `valueOrAddr`, little-endian.
    pub valueOrAddr: [u8; 8],
    /// `size`: the bytes of `valueOrAddr` in use.
    pub size: u8,
    /// `rsv`.
    pub rsv: [u8; 6],
}

const _: () = assert!(std::mem::size_of::<aclrtRandomParaInfo>() == 16);

/// C `aclrtRandomNumFuncParaInfo` (`acl/acl_rt.h`): `aclrtRandomNumFuncType funcType;` then a
/// union whose largest members (uniform, normal) are two `aclrtRandomParaInfo` (the dropout
/// member is one), so the union is `paramInfo[2]` here: 36 bytes, 4-aligned.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct aclrtRandomNumFuncParaInfo {
    /// `funcType` (`ACL_RT_RANDOM_NUM_FUNC_TYPE_*`).
    pub funcType: u32,
    /// `paramInfo`: dropout ratio / min / mean, then max / stddev.
    pub paramInfo: [aclrtRandomParaInfo; 2],
}

const _: () = assert!(std::mem::size_of::<aclrtRandomNumFuncParaInfo>() == 36);

/// C `aclrtRandomNumTaskInfo` (`acl/acl_rt.h`): `aclDataType dataType;
/// aclrtRandomNumFuncParaInfo randomNumFuncParaInfo; void* randomParaAddr; void*
/// randomResultAddr; void* randomCounterAddr; aclrtRandomParaInfo randomSeed;
/// aclrtRandomParaInfo randomNum; uint8_t rsv[8];`: 104 bytes on LP64 (the pointers at 40,
/// 48, 56). `aclrtRandomNumAsync` writes the runtime's own type number into `dataType`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct aclrtRandomNumTaskInfo {
    /// `dataType` (`aclDataType`).
    pub dataType: i32,
    /// `randomNumFuncParaInfo`.
    pub randomNumFuncParaInfo: aclrtRandomNumFuncParaInfo,
    /// `randomParaAddr`: NULL lets the runtime allocate the parameter block.
    pub randomParaAddr: *mut c_void,
    /// `randomResultAddr`.
    pub randomResultAddr: *mut c_void,
    /// `randomCounterAddr`: 16 bytes of device memory holding the 128-bit counter.
    pub randomCounterAddr: *mut c_void,
    /// `randomSeed`.
    pub randomSeed: aclrtRandomParaInfo,
    /// `randomNum`: the count of numbers.
    pub randomNum: aclrtRandomParaInfo,
    /// `rsv`.
    pub rsv: [u8; 8],
}

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<aclrtRandomNumTaskInfo>() == 104);
    assert!(std::mem::offset_of!(aclrtRandomNumTaskInfo, randomParaAddr) == 40);
    assert!(std::mem::offset_of!(aclrtRandomNumTaskInfo, randomCounterAddr) == 56);
    assert!(std::mem::offset_of!(aclrtRandomNumTaskInfo, randomSeed) == 64);
    assert!(std::mem::offset_of!(aclrtRandomNumTaskInfo, randomNum) == 80);
    assert!(std::mem::offset_of!(aclrtRandomNumTaskInfo, rsv) == 96);
};

/// ACL constants (values from the CANN AscendCL API reference).
pub mod consts {
    /// `ACL_SUCCESS`.
    pub const ACL_SUCCESS: i32 = 0;
    /// `ACL_STREAM_FAST_LAUNCH`.
    pub const ACL_STREAM_FAST_LAUNCH: u32 = 0x1;
    /// `ACL_STREAM_FAST_SYNC`.
    pub const ACL_STREAM_FAST_SYNC: u32 = 0x2;
    /// `ACL_STREAM_PERSISTENT`.
    pub const ACL_STREAM_PERSISTENT: u32 = 0x4;
    /// `ACL_STREAM_HUGE`.
    pub const ACL_STREAM_HUGE: u32 = 0x8;
    /// `ACL_STREAM_CPU_SCHEDULE`.
    pub const ACL_STREAM_CPU_SCHEDULE: u32 = 0x10;
    /// `ACL_STREAM_DEVICE_USE_ONLY`.
    pub const ACL_STREAM_DEVICE_USE_ONLY: u32 = 0x20;
    /// `ACL_EVENT_SYNC`.
    pub const ACL_EVENT_SYNC: u32 = 0x1;
    /// `ACL_EVENT_CAPTURE_STREAM_PROGRESS`.
    pub const ACL_EVENT_CAPTURE_STREAM_PROGRESS: u32 = 0x2;
    /// `ACL_EVENT_TIME_LINE`.
    pub const ACL_EVENT_TIME_LINE: u32 = 0x8;
    /// `ACL_EVENT_DEVICE_USE_ONLY`.
    pub const ACL_EVENT_DEVICE_USE_ONLY: u32 = 0x10;
    /// `ACL_EVENT_EXTERNAL`.
    pub const ACL_EVENT_EXTERNAL: u32 = 0x20;
    /// `ACL_EVENT_IPC`.
    pub const ACL_EVENT_IPC: u32 = 0x40;
    /// `ACL_CANN_ATTR_INF_NAN` (`aclCannAttr`).
    pub const ACL_CANN_ATTR_INF_NAN: i32 = 0;
    /// `ACL_CANN_ATTR_BF16` (`aclCannAttr`).
    pub const ACL_CANN_ATTR_BF16: i32 = 1;
    /// `ACL_CANN_ATTR_JIT_COMPILE` (`aclCannAttr`).
    pub const ACL_CANN_ATTR_JIT_COMPILE: i32 = 2;
    /// `ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV` (`aclrtDevFeatureType`).
    pub const ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV: i32 = 1;
    /// `ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV` (`aclrtDevFeatureType`).
    pub const ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV: i32 = 21;
    /// `ACL_DEV_FEATURE_SUPPORT`: `aclrtGetDeviceCapability`'s answer for a feature the device has.
    pub const ACL_DEV_FEATURE_SUPPORT: i32 = 1;
    /// `ACL_CALLBACK_NO_BLOCK`.
    pub const ACL_CALLBACK_NO_BLOCK: i32 = 0;
    /// `ACL_CALLBACK_BLOCK`.
    pub const ACL_CALLBACK_BLOCK: i32 = 1;
    /// `ACL_STREAM_STATUS_COMPLETE`.
    pub const ACL_STREAM_STATUS_COMPLETE: i32 = 0;
    /// `ACL_STREAM_STATUS_NOT_READY`.
    pub const ACL_STREAM_STATUS_NOT_READY: i32 = 1;
    /// `ACL_EVENT_RECORDED_STATUS_NOT_READY` (the **inverted** enum).
    pub const ACL_EVENT_RECORDED_STATUS_NOT_READY: i32 = 0;
    /// `ACL_EVENT_RECORDED_STATUS_COMPLETE` (the **inverted** enum).
    pub const ACL_EVENT_RECORDED_STATUS_COMPLETE: i32 = 1;
    /// `ACL_STREAM_ATTR_FAILURE_MODE`.
    pub const ACL_STREAM_ATTR_FAILURE_MODE: i32 = 1;
    /// `ACL_STREAM_ATTR_USER_CUSTOM_TAG`.
    pub const ACL_STREAM_ATTR_USER_CUSTOM_TAG: i32 = 3;
    /// `ACL_STREAM_ATTR_PRIORITY`.
    pub const ACL_STREAM_ATTR_PRIORITY: i32 = 5;
    /// `ACL_CONTINUE_ON_FAILURE`.
    pub const ACL_CONTINUE_ON_FAILURE: u64 = 0;
    /// `ACL_STOP_ON_FAILURE`.
    pub const ACL_STOP_ON_FAILURE: u64 = 1;
    /// `ACL_MODEL_RI_CAPTURE_MODE_GLOBAL`.
    pub const ACL_MODEL_RI_CAPTURE_MODE_GLOBAL: i32 = 0;
    /// `ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL`.
    pub const ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL: i32 = 1;
    /// `ACL_MODEL_RI_CAPTURE_MODE_RELAXED`.
    pub const ACL_MODEL_RI_CAPTURE_MODE_RELAXED: i32 = 2;
    /// `ACL_MODEL_RI_CAPTURE_STATUS_NONE`.
    pub const ACL_MODEL_RI_CAPTURE_STATUS_NONE: i32 = 0;
    /// `ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE`.
    pub const ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE: i32 = 1;
    /// `ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED`.
    pub const ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED: i32 = 2;
    /// `ACL_MEM_MALLOC_HUGE_FIRST`.
    pub const ACL_MEM_MALLOC_HUGE_FIRST: i32 = 0;
    /// `ACL_MEMCPY_HOST_TO_DEVICE`.
    pub const ACL_MEMCPY_HOST_TO_DEVICE: i32 = 1;
    /// `ACL_MEMCPY_DEVICE_TO_HOST`.
    pub const ACL_MEMCPY_DEVICE_TO_HOST: i32 = 2;
    /// `ACL_MEMCPY_DEVICE_TO_DEVICE`.
    pub const ACL_MEMCPY_DEVICE_TO_DEVICE: i32 = 3;
    /// `ACL_MODEL_STREAM_FLAG_HEAD` (doc-only constant of `aclmdlRIBindStream`).
    pub const ACL_MODEL_STREAM_FLAG_HEAD: u32 = 0;
    /// `ACL_RT_THREAD_LEVEL` (`aclrtLastErrLevel`).
    pub const ACL_RT_THREAD_LEVEL: i32 = 0;
    /// `ACL_RT_STREAM_FLAG` (`aclrtStreamConfigAttr`; value passed as `uint32_t`).
    pub const ACL_RT_STREAM_FLAG: i32 = 2;
    /// `ACL_RT_STREAM_PRIORITY` (`aclrtStreamConfigAttr`; value passed as `uint32_t`).
    pub const ACL_RT_STREAM_PRIORITY: i32 = 3;
    /// `ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE` (`aclrtLaunchKernelAttrId`): the dynamic
    /// unified-buffer size of a launch (value member `uint32_t dynUBufSize`).
    pub const ACL_RT_LAUNCH_KERNEL_ATTR_DYN_UBUF_SIZE: i32 = 2;
    /// `ACL_ERROR_RT_PARAM_INVALID`: the runtime refused an argument (also: a binary it cannot
    /// register, an unknown kernel name).
    pub const ACL_ERROR_RT_PARAM_INVALID: i32 = 107_000;
    /// `ACL_PKG_VERSION_MAX_SIZE`: the buffer `aclsysGetVersionStr` fills.
    pub const ACL_PKG_VERSION_MAX_SIZE: usize = 128;
    /// `ACL_HOST` (`aclrtRunMode`): the program runs on a host with the NPU attached
    /// (`ACL_DEVICE`, 0, is the device's own CPU).
    pub const ACL_HOST: i32 = 1;
    /// `ACL_RT_DEV_RES_CUBE_CORE` (`aclrtDevResLimitType`).
    pub const ACL_RT_DEV_RES_CUBE_CORE: i32 = 0;
    /// `ACL_RT_DEV_RES_VECTOR_CORE` (`aclrtDevResLimitType`).
    pub const ACL_RT_DEV_RES_VECTOR_CORE: i32 = 1;
    /// `ACL_MAJOR_VERSION` of the ACL API this crate's declarations follow (1.x).
    pub const ACL_MAJOR_VERSION: i32 = 1;
}

/// A CANN package version as the runtime reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageVersion {
    /// The package name asked for (`"runtime"`).
    pub package: &'static str,
    /// `aclsysGetVersionStr`: the `Version=` text of the package's `version.info`.
    pub text: String,
    /// `aclsysGetVersionNum`: major × 10^7 + minor × 10^5 + patch × 10^3, less 300 / 200 /
    /// 100 for alpha / beta / rc plus their number; `None` where the runtime cannot parse the
    /// text (for example `8.0.RC3`, which is not `major.minor.patch`).
    pub number: Option<i32>,
}

impl PackageVersion {
    /// The number of `major.minor.patch` as `aclsysGetVersionNum` computes it.
    pub const fn number_of(major: i32, minor: i32, patch: i32) -> i32 {
        major * 10_000_000 + minor * 100_000 + patch * 1_000
    }

    /// Whether the package is known to be older than `major.minor.patch` (`false` when the
    /// number is unknown).
    pub fn older_than(&self, major: i32, minor: i32, patch: i32) -> bool {
        self.number
            .is_some_and(|n| n < Self::number_of(major, minor, patch))
    }
}

/// Why a table could not be filled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// No candidate could be opened; each place tried with the loader's message.
    NotFound {
        /// `(place, why)` in the order tried.
        tried: Vec<(String, String)>,
    },
    /// A library opened but lacks a required symbol (not an ACL runtime, or too old).
    MissingSymbol {
        /// The library.
        library: String,
        /// The first required symbol that is missing.
        symbol: &'static str,
    },
    /// A library whose `aclrtGetVersion` reports an ACL API major version other than the one
    /// these declarations follow ([`consts::ACL_MAJOR_VERSION`]): its prototypes may differ.
    UnsupportedVersion {
        /// The library.
        library: String,
        /// `major.minor.patch` as reported.
        found: (i32, i32, i32),
    },
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::NotFound { tried } => {
                f.write_str("libascendcl.so not found; tried: ")?;
                for (i, (p, why)) in tried.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{p} ({why})")?;
                }
                Ok(())
            }
            LoadError::MissingSymbol { library, symbol } => write!(
                f,
                "{library} lacks the required ACL symbol `{symbol}` (not an ACL runtime, or too old)"
            ),
            LoadError::UnsupportedVersion { library, found: (a, b, c) } => write!(
                f,
                "{library} reports ACL API {a}.{b}.{c}; xstream declares the {}.x prototypes",
                consts::ACL_MAJOR_VERSION
            ),
        }
    }
}

impl std::error::Error for LoadError {}

macro_rules! acl_table {
    (
        required { $( $r:ident = $rc:literal : fn($($ra:ty),*) $(-> $rr:ty)? ; )* }
        optional { $( $o:ident = $oc:literal : fn($($oa:ty),*) $(-> $or:ty)? ; )* }
    ) => {
        /// The ACL function table. Required symbols are plain fields, newer ones `Option`s.
        /// The [`libloading::Library`] they come from lives in the same struct, so the
        /// pointers never outlive it.
        pub struct AclFns {
            $( #[doc = concat!("`", stringify!($r), "` (required).")]
               pub $r: unsafe extern "C" fn($($ra),*) $(-> $rr)?, )*
            $( #[doc = concat!("`", stringify!($o), "` (optional: newer releases / simulator).")]
               pub $o: Option<unsafe extern "C" fn($($oa),*) $(-> $or)?>, )*
            /// Where the table came from (a path or name).
            pub library: String,
            /// `aclrtGetVersion` (major, minor, patch), read by the loader when exported.
            pub version: Option<(i32, i32, i32)>,
            /// The CANN `runtime` package version (`aclsysGetVersionStr` /
            /// `aclsysGetVersionNum`), read by the loader when exported and readable.
            pub package: Option<PackageVersion>,
            pub(crate) _lib: Option<libloading::Library>,
        }

        impl AclFns {
            /// Names of every required symbol, in table order.
            pub const REQUIRED: &'static [&'static CStr] = &[$($rc),*];
            /// Names of every optional symbol, in table order.
            pub const OPTIONAL: &'static [&'static CStr] = &[$($oc),*];

            /// Fills the table from `resolve` (symbol name to address; null when absent). Each
            /// address is transmuted to the field's declared function-pointer type: nothing here
            /// (or anywhere at run time) can check a C prototype, so the declarations below are
            /// trusted. Presence is all that is checked.
            ///
            /// # Errors
            /// [`LoadError::MissingSymbol`] for the first required symbol `resolve` lacks.
            ///
            /// # Safety
            /// Every non-null address `resolve` returns must be a function with exactly the C
            /// prototype this table declares for the symbol of that name (the public ACL
            /// headers' prototype), valid for as long as the table lives.
            pub unsafe fn load_with(
                library: &str,
                mut resolve: impl FnMut(&CStr) -> *mut c_void,
            ) -> Result<Self, LoadError> {
                Ok(Self {
                    $( $r: {
                        let p = resolve($rc);
                        if p.is_null() {
                            return Err(LoadError::MissingSymbol {
                                library: library.to_string(),
                                symbol: stringify!($r),
                            });
                        }
                        // SAFETY: non-null, and the caller promises the prototype matches.
                        unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($ra),*) $(-> $rr)?>(p) }
                    }, )*
                    $( $o: {
                        let p = resolve($oc);
                        if p.is_null() {
                            None
                        } else {
                            // SAFETY: non-null, and the caller promises the prototype matches.
                            Some(unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($oa),*) $(-> $or)?>(p) })
                        }
                    }, )*
                    library: library.to_string(),
                    version: None,
                    package: None,
                    _lib: None,
                })
            }

            /// The optional symbols this table has, by name.
            pub fn present_optional(&self) -> Vec<&'static str> {
                let mut v = Vec::new();
                $( if self.$o.is_some() { v.push(stringify!($o)); } )*
                v
            }
        }
    };
}

type P = *mut c_void;
type PP = *mut *mut c_void;

acl_table! {
    required {
        aclInit = c"aclInit": fn(*const c_char) -> aclError;
        aclFinalize = c"aclFinalize": fn() -> aclError;
        aclrtSetDevice = c"aclrtSetDevice": fn(i32) -> aclError;
        aclrtResetDevice = c"aclrtResetDevice": fn(i32) -> aclError;
        aclrtGetDeviceCount = c"aclrtGetDeviceCount": fn(*mut u32) -> aclError;
        aclrtSynchronizeDevice = c"aclrtSynchronizeDevice": fn() -> aclError;
        aclrtSetCurrentContext = c"aclrtSetCurrentContext": fn(P) -> aclError;
        aclrtGetCurrentContext = c"aclrtGetCurrentContext": fn(PP) -> aclError;
        aclrtCreateStream = c"aclrtCreateStream": fn(PP) -> aclError;
        aclrtDestroyStream = c"aclrtDestroyStream": fn(P) -> aclError;
        aclrtSynchronizeStream = c"aclrtSynchronizeStream": fn(P) -> aclError;
        aclrtStreamQuery = c"aclrtStreamQuery": fn(P, *mut i32) -> aclError;
        aclrtStreamWaitEvent = c"aclrtStreamWaitEvent": fn(P, P) -> aclError;
        aclrtCreateEventWithFlag = c"aclrtCreateEventWithFlag": fn(PP, u32) -> aclError;
        aclrtDestroyEvent = c"aclrtDestroyEvent": fn(P) -> aclError;
        aclrtRecordEvent = c"aclrtRecordEvent": fn(P, P) -> aclError;
        aclrtQueryEventStatus = c"aclrtQueryEventStatus": fn(P, *mut i32) -> aclError;
        aclrtSynchronizeEvent = c"aclrtSynchronizeEvent": fn(P) -> aclError;
        aclrtEventElapsedTime = c"aclrtEventElapsedTime": fn(*mut f32, P, P) -> aclError;
        aclrtLaunchCallback = c"aclrtLaunchCallback": fn(aclrtCallback, P, i32, P) -> aclError;
        aclrtSubscribeReport = c"aclrtSubscribeReport": fn(u64, P) -> aclError;
        aclrtUnSubscribeReport = c"aclrtUnSubscribeReport": fn(u64, P) -> aclError;
        aclrtProcessReport = c"aclrtProcessReport": fn(i32) -> aclError;
        aclrtMalloc = c"aclrtMalloc": fn(PP, usize, i32) -> aclError;
        aclrtFree = c"aclrtFree": fn(P) -> aclError;
        aclrtMemcpyAsync = c"aclrtMemcpyAsync": fn(P, usize, *const c_void, usize, i32, P) -> aclError;
        aclrtMemsetAsync = c"aclrtMemsetAsync": fn(P, usize, i32, usize, P) -> aclError;
    }
    optional {
        aclFinalizeReference = c"aclFinalizeReference": fn(*mut u64) -> aclError;
        aclGetRecentErrMsg = c"aclGetRecentErrMsg": fn() -> *const c_char;
        aclrtPeekAtLastError = c"aclrtPeekAtLastError": fn(i32) -> aclError;
        aclrtCreateContext = c"aclrtCreateContext": fn(PP, i32) -> aclError;
        aclrtDestroyContext = c"aclrtDestroyContext": fn(P) -> aclError;
        aclrtMallocHost = c"aclrtMallocHost": fn(PP, usize) -> aclError;
        aclrtFreeHost = c"aclrtFreeHost": fn(P) -> aclError;
        aclrtDeviceGetStreamPriorityRange = c"aclrtDeviceGetStreamPriorityRange": fn(*mut i32, *mut i32) -> aclError;
        aclrtCreateStreamWithConfig = c"aclrtCreateStreamWithConfig": fn(PP, u32, u32) -> aclError;
        aclrtDestroyStreamForce = c"aclrtDestroyStreamForce": fn(P) -> aclError;
        aclrtSynchronizeStreamWithTimeout = c"aclrtSynchronizeStreamWithTimeout": fn(P, i32) -> aclError;
        aclrtSetStreamFailureMode = c"aclrtSetStreamFailureMode": fn(P, u64) -> aclError;
        aclrtStreamGetPriority = c"aclrtStreamGetPriority": fn(P, *mut u32) -> aclError;
        aclrtStreamGetFlags = c"aclrtStreamGetFlags": fn(P, *mut u32) -> aclError;
        aclrtStreamGetId = c"aclrtStreamGetId": fn(P, *mut i32) -> aclError;
        aclrtGetStreamAvailableNum = c"aclrtGetStreamAvailableNum": fn(*mut u32) -> aclError;
        aclrtSetStreamAttribute = c"aclrtSetStreamAttribute": fn(P, i32, *mut aclrtStreamAttrValue) -> aclError;
        aclrtGetStreamAttribute = c"aclrtGetStreamAttribute": fn(P, i32, *mut aclrtStreamAttrValue) -> aclError;
        aclrtCreateEventExWithFlag = c"aclrtCreateEventExWithFlag": fn(PP, u32) -> aclError;
        aclrtSynchronizeEventWithTimeout = c"aclrtSynchronizeEventWithTimeout": fn(P, i32) -> aclError;
        aclrtLaunchHostFunc = c"aclrtLaunchHostFunc": fn(P, aclrtCallback, P) -> aclError;
        aclrtAllocatorCreateDesc = c"aclrtAllocatorCreateDesc": fn() -> P;
        aclrtAllocatorDestroyDesc = c"aclrtAllocatorDestroyDesc": fn(P) -> aclError;
        aclrtAllocatorSetObjToDesc = c"aclrtAllocatorSetObjToDesc": fn(P, P) -> aclError;
        aclrtAllocatorSetAllocFuncToDesc = c"aclrtAllocatorSetAllocFuncToDesc": fn(P, aclrtAllocatorAllocFunc) -> aclError;
        aclrtAllocatorSetFreeFuncToDesc = c"aclrtAllocatorSetFreeFuncToDesc": fn(P, aclrtAllocatorFreeFunc) -> aclError;
        aclrtAllocatorSetAllocAdviseFuncToDesc = c"aclrtAllocatorSetAllocAdviseFuncToDesc": fn(P, aclrtAllocatorAllocAdviseFunc) -> aclError;
        aclrtAllocatorSetGetAddrFromBlockFuncToDesc = c"aclrtAllocatorSetGetAddrFromBlockFuncToDesc": fn(P, aclrtAllocatorGetAddrFromBlockFunc) -> aclError;
        aclrtAllocatorRegister = c"aclrtAllocatorRegister": fn(P, P) -> aclError;
        aclrtAllocatorGetByStream = c"aclrtAllocatorGetByStream": fn(P, PP, PP, *mut Option<aclrtAllocatorAllocFunc>, *mut Option<aclrtAllocatorFreeFunc>, *mut Option<aclrtAllocatorAllocAdviseFunc>, *mut Option<aclrtAllocatorGetAddrFromBlockFunc>) -> aclError;
        aclrtAllocatorUnregister = c"aclrtAllocatorUnregister": fn(P) -> aclError;
        aclmdlRICaptureBegin = c"aclmdlRICaptureBegin": fn(P, i32) -> aclError;
        aclmdlRICaptureGetInfo = c"aclmdlRICaptureGetInfo": fn(P, *mut i32, PP) -> aclError;
        aclmdlRICaptureEnd = c"aclmdlRICaptureEnd": fn(P, PP) -> aclError;
        aclmdlRIExecuteAsync = c"aclmdlRIExecuteAsync": fn(P, P) -> aclError;
        aclmdlRIDestroy = c"aclmdlRIDestroy": fn(P) -> aclError;
        aclmdlRIBuildBegin = c"aclmdlRIBuildBegin": fn(PP, u32) -> aclError;
        aclmdlRIBindStream = c"aclmdlRIBindStream": fn(P, P, u32) -> aclError;
        aclmdlRIEndTask = c"aclmdlRIEndTask": fn(P, P) -> aclError;
        aclmdlRIBuildEnd = c"aclmdlRIBuildEnd": fn(P, P) -> aclError;
        aclmdlRIUnbindStream = c"aclmdlRIUnbindStream": fn(P, P) -> aclError;
        aclrtGetVersion = c"aclrtGetVersion": fn(*mut i32, *mut i32, *mut i32) -> aclError;
        aclsysGetVersionStr = c"aclsysGetVersionStr": fn(*mut c_char, *mut c_char) -> aclError;
        aclsysGetVersionNum = c"aclsysGetVersionNum": fn(*mut c_char, *mut i32) -> aclError;
        aclrtGetRunMode = c"aclrtGetRunMode": fn(*mut i32) -> aclError;
        aclrtGetSocName = c"aclrtGetSocName": fn() -> *const c_char;
        aclrtGetResInCurrentThread = c"aclrtGetResInCurrentThread": fn(i32, *mut u32) -> aclError;
        aclrtGetDeviceInfo = c"aclrtGetDeviceInfo": fn(u32, i32, *mut i64) -> aclError;
        aclrtGetMemInfo = c"aclrtGetMemInfo": fn(i32, *mut usize, *mut usize) -> aclError;
        aclrtDeviceGetUuid = c"aclrtDeviceGetUuid": fn(i32, *mut [u8; 16]) -> aclError;
        aclrtDeviceGetPCIBusId = c"aclrtDeviceGetPCIBusId": fn(i32, *mut c_char, i32) -> aclError;
        aclrtGetErrorVerbose = c"aclrtGetErrorVerbose": fn(i32, *mut aclrtErrorInfo) -> aclError;
        aclrtMemset = c"aclrtMemset": fn(P, usize, i32, usize) -> aclError;
        aclDataTypeSize = c"aclDataTypeSize": fn(i32) -> usize;
        aclFloat16ToFloat = c"aclFloat16ToFloat": fn(u16) -> f32;
        aclFloatToFloat16 = c"aclFloatToFloat16": fn(f32) -> u16;
        aclrtMemcpy = c"aclrtMemcpy": fn(P, usize, *const c_void, usize, i32) -> aclError;
        aclrtDeviceCanAccessPeer = c"aclrtDeviceCanAccessPeer": fn(*mut i32, i32, i32) -> aclError;
        aclrtDeviceEnablePeerAccess = c"aclrtDeviceEnablePeerAccess": fn(i32, u32) -> aclError;
        aclrtDeviceDisablePeerAccess = c"aclrtDeviceDisablePeerAccess": fn(i32) -> aclError;
        aclrtHostRegister = c"aclrtHostRegister": fn(P, u64, i32, PP) -> aclError;
        aclrtHostUnregister = c"aclrtHostUnregister": fn(P) -> aclError;
        aclrtSetExceptionInfoCallback = c"aclrtSetExceptionInfoCallback": fn(Option<aclrtExceptionInfoCallback>) -> aclError;
        aclrtGetTaskIdFromExceptionInfo = c"aclrtGetTaskIdFromExceptionInfo": fn(*const c_void) -> u32;
        aclrtGetStreamIdFromExceptionInfo = c"aclrtGetStreamIdFromExceptionInfo": fn(*const c_void) -> u32;
        aclrtGetThreadIdFromExceptionInfo = c"aclrtGetThreadIdFromExceptionInfo": fn(*const c_void) -> u32;
        aclrtGetDeviceIdFromExceptionInfo = c"aclrtGetDeviceIdFromExceptionInfo": fn(*const c_void) -> u32;
        aclrtGetErrorCodeFromExceptionInfo = c"aclrtGetErrorCodeFromExceptionInfo": fn(*const c_void) -> u32;
        aclrtValueWait = c"aclrtValueWait": fn(P, u64, u32, P) -> aclError;
        aclrtValueWrite = c"aclrtValueWrite": fn(P, u64, u32, P) -> aclError;
        aclrtCreateStreamConfigHandle = c"aclrtCreateStreamConfigHandle": fn() -> P;
        aclrtSetStreamConfigOpt = c"aclrtSetStreamConfigOpt": fn(P, i32, *const c_void, usize) -> aclError;
        aclrtDestroyStreamConfigHandle = c"aclrtDestroyStreamConfigHandle": fn(P) -> aclError;
        aclrtCreateStreamV2 = c"aclrtCreateStreamV2": fn(PP, *const c_void) -> aclError;
        aclrtBinaryLoadFromData = c"aclrtBinaryLoadFromData": fn(*const c_void, usize, *const aclrtBinaryLoadOptions, PP) -> aclError;
        aclrtBinaryGetFunction = c"aclrtBinaryGetFunction": fn(P, *const c_char, PP) -> aclError;
        aclrtBinaryUnLoad = c"aclrtBinaryUnLoad": fn(P) -> aclError;
        aclrtKernelArgsInit = c"aclrtKernelArgsInit": fn(P, PP) -> aclError;
        aclrtKernelArgsAppend = c"aclrtKernelArgsAppend": fn(P, P, usize, PP) -> aclError;
        aclrtKernelArgsFinalize = c"aclrtKernelArgsFinalize": fn(P) -> aclError;
        aclrtLaunchKernelWithConfig = c"aclrtLaunchKernelWithConfig": fn(P, u32, P, *mut aclrtLaunchKernelCfg, P, P) -> aclError;
        aclrtReduceAsync = c"aclrtReduceAsync": fn(P, *const c_void, u64, u32, i32, P, P) -> aclError;
        aclrtRandomNumAsync = c"aclrtRandomNumAsync": fn(*mut aclrtRandomNumTaskInfo, P, P) -> aclError;
        xsimLaunchFault = c"xsimLaunchFault": fn(P, i32) -> aclError;
        aclrtIpcGetEventHandle = c"aclrtIpcGetEventHandle": fn(P, *mut aclrtIpcEventHandle) -> aclError;
        aclrtIpcOpenEventHandle = c"aclrtIpcOpenEventHandle": fn(aclrtIpcEventHandle, PP) -> aclError;
        aclrtIpcMemGetExportKey = c"aclrtIpcMemGetExportKey": fn(P, usize, *mut c_char, usize, u64) -> aclError;
        aclrtIpcMemSetImportPid = c"aclrtIpcMemSetImportPid": fn(*const c_char, *mut i32, usize) -> aclError;
        aclrtIpcMemImportByKey = c"aclrtIpcMemImportByKey": fn(PP, *const c_char, u64) -> aclError;
        aclrtIpcMemClose = c"aclrtIpcMemClose": fn(*const c_char) -> aclError;
        aclrtSetDeviceSatMode = c"aclrtSetDeviceSatMode": fn(i32) -> aclError;
        aclrtMemGetAllocationGranularity = c"aclrtMemGetAllocationGranularity": fn(*mut aclrtPhysicalMemProp, u32, *mut usize) -> aclError;
        aclrtReserveMemAddress = c"aclrtReserveMemAddress": fn(PP, usize, usize, P, u64) -> aclError;
        aclrtReleaseMemAddress = c"aclrtReleaseMemAddress": fn(P) -> aclError;
        aclrtMallocPhysical = c"aclrtMallocPhysical": fn(PP, usize, *const aclrtPhysicalMemProp, u64) -> aclError;
        aclrtFreePhysical = c"aclrtFreePhysical": fn(P) -> aclError;
        aclrtMapMem = c"aclrtMapMem": fn(P, usize, usize, P, u64) -> aclError;
        aclrtUnmapMem = c"aclrtUnmapMem": fn(P) -> aclError;
        aclrtMemSetAccess = c"aclrtMemSetAccess": fn(P, usize, *mut aclrtMemAccessDesc, usize) -> aclError;
        aclrtMemExportToShareableHandle = c"aclrtMemExportToShareableHandle": fn(P, u32, u64, *mut u64) -> aclError;
        aclrtMemImportFromShareableHandle = c"aclrtMemImportFromShareableHandle": fn(u64, i32, PP) -> aclError;
        aclrtMemSetPidToShareableHandle = c"aclrtMemSetPidToShareableHandle": fn(u64, *mut i32, usize) -> aclError;
        aclrtGetDeviceSatMode = c"aclrtGetDeviceSatMode": fn(*mut i32) -> aclError;
        aclrtGetDeviceCapability = c"aclrtGetDeviceCapability": fn(i32, i32, *mut i32) -> aclError;
        aclGetCannAttribute = c"aclGetCannAttribute": fn(i32, *mut i32) -> aclError;
        aclGetCannAttributeList = c"aclGetCannAttributeList": fn(*mut *const i32, *mut usize) -> aclError;
    }
}

impl std::fmt::Debug for AclFns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AclFns")
            .field("library", &self.library)
            .field("optional", &self.present_optional())
            .finish()
    }
}

impl AclFns {
    /// Opens `path` with the platform loader and fills the table from it.
    ///
    /// # Errors
    /// The loader's message, or [`LoadError::MissingSymbol`].
    pub fn open(path: &str) -> Result<Self, (String, LoadError)> {
        // SAFETY: loading a library runs its initialisers; libascendcl.so (or the simulator)
        // has no initialisers with preconditions. This is the inherent risk of dlopen.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| {
            (
                e.to_string(),
                LoadError::NotFound {
                    tried: vec![(path.to_string(), e.to_string())],
                },
            )
        })?;
        let resolve = |name: &CStr| -> *mut c_void {
            // SAFETY: we read the symbol's address as a plain pointer; it is only called
            // through the typed fields, whose prototypes follow the ACL headers.
            match unsafe { lib.get::<*mut c_void>(name) } {
                Ok(s) => *s,
                Err(_) => std::ptr::null_mut(),
            }
        };
        // SAFETY: trusted, not checked: the library is an ACL runtime whose exported names
        // carry the prototypes of the public ACL headers, which this table's declarations
        // follow (the loader refuses a runtime that reports another ACL major version); `lib`
        // is stored in the table below, so the pointers live as long as the table.
        let mut t = unsafe { Self::load_with(path, resolve) }.map_err(|e| (e.to_string(), e))?;
        t._lib = Some(lib);
        Ok(t)
    }
}

/// `aclrtStream`: a raw stream handle (`NULL` is the current context's default stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawStream(pub *mut c_void);
/// `aclrtEvent`: a raw event handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawEvent(pub *mut c_void);
/// `aclrtContext`: a raw context handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawContext(pub *mut c_void);
/// `aclmdlRI`: a raw model run instance handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawModel(pub *mut c_void);
/// `aclrtBinHandle`: a loaded kernel binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawBinary(pub *mut c_void);
/// `aclrtFuncHandle`: a kernel function of a loaded binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RawFunction(pub *mut c_void);
/// A raw device pointer (from `aclrtMalloc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DevPtr(pub *mut c_void);

// SAFETY: ACL handles are opaque tokens that the runtime accepts from any thread once the
// owning context is current on that thread (CANN AscendCL API reference); xstream binds the context before
// every call, so moving or sharing the token between threads is sound.
unsafe impl Send for RawStream {}
// SAFETY: as above; the token itself is immutable.
unsafe impl Sync for RawStream {}
// SAFETY: as for RawStream.
unsafe impl Send for RawEvent {}
// SAFETY: as for RawStream.
unsafe impl Sync for RawEvent {}
// SAFETY: a context handle may be made current on any thread (aclrtSetCurrentContext).
unsafe impl Send for RawContext {}
// SAFETY: as above.
unsafe impl Sync for RawContext {}
// SAFETY: as for RawStream.
unsafe impl Send for RawModel {}
// SAFETY: as for RawStream.
unsafe impl Sync for RawModel {}
// SAFETY: as for RawStream: binary and function handles are opaque tokens of the runtime.
unsafe impl Send for RawBinary {}
// SAFETY: as above.
unsafe impl Sync for RawBinary {}
// SAFETY: as for RawBinary.
unsafe impl Send for RawFunction {}
// SAFETY: as above.
unsafe impl Sync for RawFunction {}
// SAFETY: a device address is plain data; accesses go through stream-ordered runtime calls.
unsafe impl Send for DevPtr {}
// SAFETY: as above.
unsafe impl Sync for DevPtr {}
