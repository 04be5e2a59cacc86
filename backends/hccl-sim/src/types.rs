//! HCCL's public C types and constants (values from HCCL's `hccl_types.h`, as published in the
//! CANN HCCL API reference): result codes, data types, reduction operations, the root info size.

/// `HcclResult`: the return code of every HCCL function.
pub type HcclResult = i32;

/// `HCCL_SUCCESS`.
pub const HCCL_SUCCESS: HcclResult = 0;
/// `HCCL_E_PARA`: parameter error.
pub const HCCL_E_PARA: HcclResult = 1;
/// `HCCL_E_PTR`: NULL pointer.
pub const HCCL_E_PTR: HcclResult = 2;
/// `HCCL_E_MEMORY`: memory error.
pub const HCCL_E_MEMORY: HcclResult = 3;
/// `HCCL_E_INTERNAL`: internal error.
pub const HCCL_E_INTERNAL: HcclResult = 4;
/// `HCCL_E_NOT_SUPPORT`: feature not supported.
pub const HCCL_E_NOT_SUPPORT: HcclResult = 5;
/// `HCCL_E_NOT_FOUND`: resource not found.
pub const HCCL_E_NOT_FOUND: HcclResult = 6;
/// `HCCL_E_UNAVAIL`: resource unavailable.
pub const HCCL_E_UNAVAIL: HcclResult = 7;
/// `HCCL_E_SYSCALL`: a system call failed.
pub const HCCL_E_SYSCALL: HcclResult = 8;
/// `HCCL_E_TIMEOUT`: timeout.
pub const HCCL_E_TIMEOUT: HcclResult = 9;
/// `HCCL_E_OPEN_FILE_FAILURE`: a file could not be opened.
pub const HCCL_E_OPEN_FILE_FAILURE: HcclResult = 10;
/// `HCCL_E_RUNTIME`: a runtime (ACL) call failed.
pub const HCCL_E_RUNTIME: HcclResult = 15;
/// `HCCL_E_REMOTE`: error reported by the remote end.
pub const HCCL_E_REMOTE: HcclResult = 21;

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
/// `HCCL_DATA_TYPE_INT128` (known, never supported by the simulator).
pub const HCCL_DATA_TYPE_INT128: i32 = 12;

/// Size in bytes of an element of `dtype`, `None` for a value outside the enum.
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

/// Whether a reducing operation (all-reduce, reduce, reduce-scatter) accepts `dtype` with
/// `op`: the table of the HCCL API reference for the Atlas A2 training series (int8, int16,
/// int32, int64, fp16, fp32, bf16; no prod for int16 and bf16).
pub fn reduce_supported(dtype: i32, op: i32) -> bool {
    let types = matches!(
        dtype,
        HCCL_DATA_TYPE_INT8
            | HCCL_DATA_TYPE_INT16
            | HCCL_DATA_TYPE_INT32
            | HCCL_DATA_TYPE_INT64
            | HCCL_DATA_TYPE_FP16
            | HCCL_DATA_TYPE_FP32
            | HCCL_DATA_TYPE_BFP16
    );
    let prod_excluded =
        op == HCCL_REDUCE_PROD && matches!(dtype, HCCL_DATA_TYPE_INT16 | HCCL_DATA_TYPE_BFP16);
    types && !prod_excluded
}

/// Whether a moving operation (all-gather, broadcast, send, recv) accepts `dtype`: every type
/// but int128.
pub fn move_supported(dtype: i32) -> bool {
    dtype_size(dtype).is_some() && dtype != HCCL_DATA_TYPE_INT128
}

/// The message of `HcclGetErrorString` (a NUL-terminated static string).
pub fn error_string(code: HcclResult) -> &'static std::ffi::CStr {
    match code {
        HCCL_SUCCESS => c"HCCL_SUCCESS: no error",
        HCCL_E_PARA => c"HCCL_E_PARA: invalid argument",
        HCCL_E_PTR => c"HCCL_E_PTR: NULL pointer argument",
        HCCL_E_MEMORY => c"HCCL_E_MEMORY: memory failure",
        HCCL_E_INTERNAL => c"HCCL_E_INTERNAL: internal failure",
        HCCL_E_NOT_SUPPORT => c"HCCL_E_NOT_SUPPORT: unsupported operation or type",
        HCCL_E_NOT_FOUND => c"HCCL_E_NOT_FOUND: resource not found",
        HCCL_E_UNAVAIL => c"HCCL_E_UNAVAIL: resource unavailable",
        HCCL_E_SYSCALL => c"HCCL_E_SYSCALL: system call failed",
        HCCL_E_TIMEOUT => c"HCCL_E_TIMEOUT: timed out waiting for a peer",
        HCCL_E_OPEN_FILE_FAILURE => c"HCCL_E_OPEN_FILE_FAILURE: cannot open a file",
        11 => c"HCCL_E_TCP_CONNECT",
        12 => c"HCCL_E_ROCE_CONNECT",
        13 => c"HCCL_E_TCP_TRANSFER",
        14 => c"HCCL_E_ROCE_TRANSFER",
        HCCL_E_RUNTIME => c"HCCL_E_RUNTIME: an ACL runtime call failed",
        16 => c"HCCL_E_DRV",
        17 => c"HCCL_E_PROFILING",
        18 => c"HCCL_E_CCE",
        19 => c"HCCL_E_NETWORK",
        20 => c"HCCL_E_AGAIN",
        HCCL_E_REMOTE => c"HCCL_E_REMOTE: a peer rank failed",
        22 => c"HCCL_E_SUSPENDING",
        _ => c"unknown HcclResult",
    }
}
