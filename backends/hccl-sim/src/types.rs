//! HCCL's public C types and constants (values from `include/hccl/hccl_types.h` of the public
//! `hicann/hcomm` sources): every result code, data types, reduction operations, the root info
//! size; and the parameter checks of the Atlas A2/A3 operation path with their codes
//! (`docs/simulators.md` names the source files).

/// `HcclResult`: the return code of every HCCL function (every value of `hccl_types.h`).
pub type HcclResult = i32;

/// `HCCL_SUCCESS` (0): success.
pub const HCCL_SUCCESS: HcclResult = 0;
/// `HCCL_E_PARA` (1): parameter error.
pub const HCCL_E_PARA: HcclResult = 1;
/// `HCCL_E_PTR` (2): NULL pointer.
pub const HCCL_E_PTR: HcclResult = 2;
/// `HCCL_E_MEMORY` (3): memory error.
pub const HCCL_E_MEMORY: HcclResult = 3;
/// `HCCL_E_INTERNAL` (4): internal error.
pub const HCCL_E_INTERNAL: HcclResult = 4;
/// `HCCL_E_NOT_SUPPORT` (5): feature or type not supported.
pub const HCCL_E_NOT_SUPPORT: HcclResult = 5;
/// `HCCL_E_NOT_FOUND` (6): resource not found.
pub const HCCL_E_NOT_FOUND: HcclResult = 6;
/// `HCCL_E_UNAVAIL` (7): resource unavailable.
pub const HCCL_E_UNAVAIL: HcclResult = 7;
/// `HCCL_E_SYSCALL` (8): a system call failed.
pub const HCCL_E_SYSCALL: HcclResult = 8;
/// `HCCL_E_TIMEOUT` (9): timeout.
pub const HCCL_E_TIMEOUT: HcclResult = 9;
/// `HCCL_E_OPEN_FILE_FAILURE` (10): a file could not be opened.
pub const HCCL_E_OPEN_FILE_FAILURE: HcclResult = 10;
/// `HCCL_E_TCP_CONNECT` (11): TCP connection failed.
pub const HCCL_E_TCP_CONNECT: HcclResult = 11;
/// `HCCL_E_ROCE_CONNECT` (12): RoCE connection failed.
pub const HCCL_E_ROCE_CONNECT: HcclResult = 12;
/// `HCCL_E_TCP_TRANSFER` (13): TCP transfer failed.
pub const HCCL_E_TCP_TRANSFER: HcclResult = 13;
/// `HCCL_E_ROCE_TRANSFER` (14): RoCE transfer failed.
pub const HCCL_E_ROCE_TRANSFER: HcclResult = 14;
/// `HCCL_E_RUNTIME` (15): a runtime (ACL) call failed.
pub const HCCL_E_RUNTIME: HcclResult = 15;
/// `HCCL_E_DRV` (16): a driver call failed.
pub const HCCL_E_DRV: HcclResult = 16;
/// `HCCL_E_PROFILING` (17): a profiling call failed.
pub const HCCL_E_PROFILING: HcclResult = 17;
/// `HCCL_E_CCE` (18): a CCE call failed.
pub const HCCL_E_CCE: HcclResult = 18;
/// `HCCL_E_NETWORK` (19): a network call failed.
pub const HCCL_E_NETWORK: HcclResult = 19;
/// `HCCL_E_AGAIN` (20): try again.
pub const HCCL_E_AGAIN: HcclResult = 20;
/// `HCCL_E_REMOTE` (21): error reported by the remote end (error CQE).
pub const HCCL_E_REMOTE: HcclResult = 21;
/// `HCCL_E_SUSPENDING` (22): the communicator is suspending.
pub const HCCL_E_SUSPENDING: HcclResult = 22;
/// `HCCL_E_OPRETRY_FAIL` (23): the operation retry failed.
pub const HCCL_E_OPRETRY_FAIL: HcclResult = 23;
/// `HCCL_E_OOM` (24): out of memory.
pub const HCCL_E_OOM: HcclResult = 24;
/// `HCCL_E_IN_STATUS` (1041): the error is in the status.
pub const HCCL_E_IN_STATUS: HcclResult = 1041;
/// `HCCL_E_RESERVED` (1042): end of the enum (reserved).
pub const HCCL_E_RESERVED: HcclResult = 1042;

/// Every `HcclResult` value with its name, in `hccl_types.h` order.
pub const RESULT_CODES: &[(HcclResult, &str)] = &[
    (HCCL_SUCCESS, "HCCL_SUCCESS"),
    (HCCL_E_PARA, "HCCL_E_PARA"),
    (HCCL_E_PTR, "HCCL_E_PTR"),
    (HCCL_E_MEMORY, "HCCL_E_MEMORY"),
    (HCCL_E_INTERNAL, "HCCL_E_INTERNAL"),
    (HCCL_E_NOT_SUPPORT, "HCCL_E_NOT_SUPPORT"),
    (HCCL_E_NOT_FOUND, "HCCL_E_NOT_FOUND"),
    (HCCL_E_UNAVAIL, "HCCL_E_UNAVAIL"),
    (HCCL_E_SYSCALL, "HCCL_E_SYSCALL"),
    (HCCL_E_TIMEOUT, "HCCL_E_TIMEOUT"),
    (HCCL_E_OPEN_FILE_FAILURE, "HCCL_E_OPEN_FILE_FAILURE"),
    (HCCL_E_TCP_CONNECT, "HCCL_E_TCP_CONNECT"),
    (HCCL_E_ROCE_CONNECT, "HCCL_E_ROCE_CONNECT"),
    (HCCL_E_TCP_TRANSFER, "HCCL_E_TCP_TRANSFER"),
    (HCCL_E_ROCE_TRANSFER, "HCCL_E_ROCE_TRANSFER"),
    (HCCL_E_RUNTIME, "HCCL_E_RUNTIME"),
    (HCCL_E_DRV, "HCCL_E_DRV"),
    (HCCL_E_PROFILING, "HCCL_E_PROFILING"),
    (HCCL_E_CCE, "HCCL_E_CCE"),
    (HCCL_E_NETWORK, "HCCL_E_NETWORK"),
    (HCCL_E_AGAIN, "HCCL_E_AGAIN"),
    (HCCL_E_REMOTE, "HCCL_E_REMOTE"),
    (HCCL_E_SUSPENDING, "HCCL_E_SUSPENDING"),
    (HCCL_E_OPRETRY_FAIL, "HCCL_E_OPRETRY_FAIL"),
    (HCCL_E_OOM, "HCCL_E_OOM"),
    (HCCL_E_IN_STATUS, "HCCL_E_IN_STATUS"),
    (HCCL_E_RESERVED, "HCCL_E_RESERVED"),
];

/// `HCCL_ROOT_INFO_BYTES`: size of `HcclRootInfo`.
pub const HCCL_ROOT_INFO_BYTES: usize = 4108;

/// `HcclReduceOp` values.
pub const HCCL_REDUCE_SUM: i32 = 0;
/// `HCCL_REDUCE_PROD`.
pub const HCCL_REDUCE_PROD: i32 = 1;
/// `HCCL_REDUCE_MAX`.
pub const HCCL_REDUCE_MAX: i32 = 2;
/// `HCCL_REDUCE_MIN`.
pub const HCCL_REDUCE_MIN: i32 = 3;

/// `HcclDataType` values.
pub const HCCL_DATA_TYPE_INT8: i32 = 0;
/// `HCCL_DATA_TYPE_INT16`.
pub const HCCL_DATA_TYPE_INT16: i32 = 1;
/// `HCCL_DATA_TYPE_INT32`.
pub const HCCL_DATA_TYPE_INT32: i32 = 2;
/// `HCCL_DATA_TYPE_FP16`.
pub const HCCL_DATA_TYPE_FP16: i32 = 3;
/// `HCCL_DATA_TYPE_FP32`.
pub const HCCL_DATA_TYPE_FP32: i32 = 4;
/// `HCCL_DATA_TYPE_INT64`.
pub const HCCL_DATA_TYPE_INT64: i32 = 5;
/// `HCCL_DATA_TYPE_UINT64`.
pub const HCCL_DATA_TYPE_UINT64: i32 = 6;
/// `HCCL_DATA_TYPE_UINT8`.
pub const HCCL_DATA_TYPE_UINT8: i32 = 7;
/// `HCCL_DATA_TYPE_UINT16`.
pub const HCCL_DATA_TYPE_UINT16: i32 = 8;
/// `HCCL_DATA_TYPE_UINT32`.
pub const HCCL_DATA_TYPE_UINT32: i32 = 9;
/// `HCCL_DATA_TYPE_FP64`.
pub const HCCL_DATA_TYPE_FP64: i32 = 10;
/// `HCCL_DATA_TYPE_BFP16`.
pub const HCCL_DATA_TYPE_BFP16: i32 = 11;
/// `HCCL_DATA_TYPE_INT128`.
pub const HCCL_DATA_TYPE_INT128: i32 = 12;
/// `HCCL_DATA_TYPE_HIF8` (13 is a gap in the enum).
pub const HCCL_DATA_TYPE_HIF8: i32 = 14;
/// `HCCL_DATA_TYPE_FP8E4M3`.
pub const HCCL_DATA_TYPE_FP8E4M3: i32 = 15;
/// `HCCL_DATA_TYPE_FP8E5M2`.
pub const HCCL_DATA_TYPE_FP8E5M2: i32 = 16;
/// `HCCL_DATA_TYPE_FP8E8M0`.
pub const HCCL_DATA_TYPE_FP8E8M0: i32 = 17;
/// `HCCL_DATA_TYPE_RESERVED`.
pub const HCCL_DATA_TYPE_RESERVED: i32 = 255;
/// `HCCL_REDUCE_RESERVED`.
pub const HCCL_REDUCE_RESERVED: i32 = 255;

/// `SYS_MAX_COUNT`: the largest element count an operation accepts (a larger one is
/// `HCCL_E_PARA`).
pub const SYS_MAX_COUNT: u64 = 0x7_FFFF_FFFF;

/// Size in bytes of an element of `dtype` for the types the Atlas A2/A3 operation path accepts
/// (0 to 12), `None` for any other value.
pub fn dtype_size(dtype: i32) -> Option<usize> {
    Some(match dtype {
        HCCL_DATA_TYPE_INT8 | HCCL_DATA_TYPE_UINT8 => 1,
        HCCL_DATA_TYPE_INT16
        | HCCL_DATA_TYPE_UINT16
        | HCCL_DATA_TYPE_FP16
        | HCCL_DATA_TYPE_BFP16 => 2,
        HCCL_DATA_TYPE_INT32 | HCCL_DATA_TYPE_UINT32 | HCCL_DATA_TYPE_FP32 => 4,
        HCCL_DATA_TYPE_INT64 | HCCL_DATA_TYPE_UINT64 | HCCL_DATA_TYPE_FP64 => 8,
        HCCL_DATA_TYPE_INT128 => 16,
        _ => return None,
    })
}

/// The count check of every operation: above [`SYS_MAX_COUNT`] is `HCCL_E_PARA`.
pub fn check_count(count: u64) -> Result<(), HcclResult> {
    if count > SYS_MAX_COUNT {
        Err(HCCL_E_PARA)
    } else {
        Ok(())
    }
}

/// The data type check of every operation: a value outside int8 … int128 (0 to 12; the fp8
/// types and every other value) is `HCCL_E_NOT_SUPPORT`.
pub fn check_dtype(dtype: i32) -> Result<(), HcclResult> {
    dtype_size(dtype).map(|_| ()).ok_or(HCCL_E_NOT_SUPPORT)
}

/// The reduction checks of the reducing operations (all-reduce, reduce, reduce-scatter), in
/// the library's order: an op outside sum … min is `HCCL_E_NOT_SUPPORT`; prod on int16 or
/// bf16 is `HCCL_E_NOT_SUPPORT` (Atlas A2/A3).
pub fn check_reduce_op(dtype: i32, op: i32) -> Result<(), HcclResult> {
    if !(HCCL_REDUCE_SUM..=HCCL_REDUCE_MIN).contains(&op) {
        return Err(HCCL_E_NOT_SUPPORT);
    }
    if op == HCCL_REDUCE_PROD && matches!(dtype, HCCL_DATA_TYPE_INT16 | HCCL_DATA_TYPE_BFP16) {
        return Err(HCCL_E_NOT_SUPPORT);
    }
    Ok(())
}

/// The communicator's reduce type check (after [`check_reduce_op`]): uint8, uint16, uint32,
/// uint64 and fp64 are `HCCL_E_NOT_SUPPORT`. int128 is refused too: the library's checks let it
/// pass, what its algorithms then do was not read, and the double does not reduce it.
pub fn check_reduce_dtype(dtype: i32) -> Result<(), HcclResult> {
    match dtype {
        HCCL_DATA_TYPE_UINT8
        | HCCL_DATA_TYPE_UINT16
        | HCCL_DATA_TYPE_UINT32
        | HCCL_DATA_TYPE_UINT64
        | HCCL_DATA_TYPE_FP64
        | HCCL_DATA_TYPE_INT128 => Err(HCCL_E_NOT_SUPPORT),
        _ => Ok(()),
    }
}

/// The name of an `HcclResult` value, `None` outside the enum.
pub fn code_name(code: HcclResult) -> Option<&'static str> {
    RESULT_CODES.iter().find(|c| c.0 == code).map(|c| c.1)
}

/// The message of `HcclGetErrorString`, as the library returns it: one message per code from
/// `HCCL_SUCCESS` to `HCCL_E_OOM`; `"unknown err"` for a value inside the enum's range without
/// a message (25 to 1041, `HCCL_E_IN_STATUS` included); `"unknown error"` below 0 or from
/// `HCCL_E_RESERVED` (1042) up.
pub fn error_string(code: HcclResult) -> &'static std::ffi::CStr {
    if !(HCCL_SUCCESS..HCCL_E_RESERVED).contains(&code) {
        return c"unknown error";
    }
    match code {
        HCCL_SUCCESS => c"no error",
        HCCL_E_PARA => c"parameter error",
        HCCL_E_PTR => c"empty pointer",
        HCCL_E_MEMORY => c"memory error",
        HCCL_E_INTERNAL => c"internal error",
        HCCL_E_NOT_SUPPORT => c"not support feature",
        HCCL_E_NOT_FOUND => c"not found specific resource",
        HCCL_E_UNAVAIL => c"resource unavailable",
        HCCL_E_SYSCALL => c"call system interface error",
        HCCL_E_TIMEOUT => c"timeout",
        HCCL_E_OPEN_FILE_FAILURE => c"open file fail",
        HCCL_E_TCP_CONNECT => c"tcp connect fail",
        HCCL_E_ROCE_CONNECT => c"roce connect fail",
        HCCL_E_TCP_TRANSFER => c"tcp transfer fail",
        HCCL_E_ROCE_TRANSFER => c"roce transfer fail",
        HCCL_E_RUNTIME => c"call runtime api fail",
        HCCL_E_DRV => c"call driver api fail",
        HCCL_E_PROFILING => c"call profiling api fail",
        HCCL_E_CCE => c"call cce api fail",
        HCCL_E_NETWORK => c"call network api fail",
        HCCL_E_AGAIN => c"try again",
        HCCL_E_REMOTE => c"error cqe",
        HCCL_E_SUSPENDING => c"error communicator suspending",
        HCCL_E_OPRETRY_FAIL => c"retry constraint",
        HCCL_E_OOM => c"out of memory",
        _ => c"unknown err",
    }
}
