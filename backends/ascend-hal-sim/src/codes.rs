//! Driver return codes and enumerators, with the values of the driver headers the CANN runtime
//! includes (`pkg_inc/driver/ascend_hal_error.h`, `ascend_hal_define.h`, `ascend_hal_base.h`,
//! `hal_pkg/trs_pkg.h`).

/// `DRV_ERROR_NONE`: success.
pub const DRV_ERROR_NONE: i32 = 0;
/// `DRV_ERROR_INVALID_VALUE`.
pub const DRV_ERROR_INVALID_VALUE: i32 = 3;
/// `DRV_ERROR_OUT_OF_MEMORY`.
pub const DRV_ERROR_OUT_OF_MEMORY: i32 = 6;
/// `DRV_ERROR_BUSY`: already in use (a host range registered twice).
pub const DRV_ERROR_BUSY: i32 = 13;
/// `DRV_ERROR_NO_RESOURCES`: the driver is short of a resource.
pub const DRV_ERROR_NO_RESOURCES: i32 = 14;
/// `DRV_ERROR_NO_EVENT_RESOURCES`: every event id is in use.
pub const DRV_ERROR_NO_EVENT_RESOURCES: i32 = 47;
/// `DRV_ERROR_NO_STREAM_RESOURCES`: every stream id is in use.
pub const DRV_ERROR_NO_STREAM_RESOURCES: i32 = 48;
/// `DRV_ERROR_NO_NOTIFY_RESOURCES`: every notify id is in use.
pub const DRV_ERROR_NO_NOTIFY_RESOURCES: i32 = 49;
/// `DRV_ERROR_NO_MODEL_RESOURCES`: every model id is in use.
pub const DRV_ERROR_NO_MODEL_RESOURCES: i32 = 50;
/// `DRV_ERROR_WAIT_TIMEOUT`.
pub const DRV_ERROR_WAIT_TIMEOUT: i32 = 16;
/// `DRV_ERROR_NOT_SUPPORT`.
pub const DRV_ERROR_NOT_SUPPORT: i32 = 65534;

/// `drvSqCqType_t::DRV_NORMAL_TYPE`.
pub const DRV_NORMAL_TYPE: u32 = 0;
/// `drvSqCqType_t::DRV_CALLBACK_TYPE`.
pub const DRV_CALLBACK_TYPE: u32 = 1;
/// `drvSqCqType_t::DRV_LOGIC_TYPE`.
pub const DRV_LOGIC_TYPE: u32 = 2;

/// `TSDRV_FLAG_SPECIFIED_SQ_ID`.
pub const TSDRV_FLAG_SPECIFIED_SQ_ID: u32 = 1 << 7;
/// `TSDRV_FLAG_SPECIFIED_CQ_ID`.
pub const TSDRV_FLAG_SPECIFIED_CQ_ID: u32 = 1 << 8;

/// `DRV_SQCQ_PROP_SQ_STATUS`.
pub const DRV_SQCQ_PROP_SQ_STATUS: u32 = 0;
/// `DRV_SQCQ_PROP_SQ_HEAD`.
pub const DRV_SQCQ_PROP_SQ_HEAD: u32 = 1;
/// `DRV_SQCQ_PROP_SQ_TAIL`.
pub const DRV_SQCQ_PROP_SQ_TAIL: u32 = 2;
/// `DRV_SQCQ_PROP_SQ_CQE_STATUS`.
pub const DRV_SQCQ_PROP_SQ_CQE_STATUS: u32 = 4;
/// `DRV_SQCQ_PROP_SQ_REG_BASE`.
pub const DRV_SQCQ_PROP_SQ_REG_BASE: u32 = 5;
/// `DRV_SQCQ_PROP_SQ_DEPTH`.
pub const DRV_SQCQ_PROP_SQ_DEPTH: u32 = 7;
