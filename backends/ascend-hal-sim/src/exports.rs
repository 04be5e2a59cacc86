//! The exported driver functions (`halXxx` / `drvXxx`), with the prototypes of the driver
//! headers the runtime includes (`pkg_inc/driver/ascend_hal*.h`). Struct fields are read and
//! written at the offsets those headers give (x86-64).
//!
//! Every function catches panics (none may cross into the runtime) and answers
//! `DRV_ERROR_INVALID_VALUE` for null outputs.
//!
//! # Why one file of this size
//! It is the emulated library's whole C ABI: every symbol the runtime resolves, in one list that
//! can be read against the runtime's calls; the behaviour behind each export lives in the modules
//! it calls (`queue`, `memory`, `limits`, `devinfo`).

#![allow(non_snake_case)]

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;
use xstream_core::sync::lock;

use crate::codes::*;
use crate::{devinfo, limits, memory, queue};

/// Runs an exported function's body: a panic becomes `DRV_ERROR_INVALID_VALUE`; the result is
/// traced.
pub(crate) fn guard(name: &str, f: impl FnOnce() -> i32) -> i32 {
    let r = catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        eprintln!("[hal-sim] {name}: internal panic caught");
        DRV_ERROR_INVALID_VALUE
    });
    crate::trace!("{name} -> {r}");
    r
}

/// Reads a `u32` field at byte offset `off` of a C struct.
///
/// # Safety
/// `p + off` must be readable for 4 bytes.
pub(crate) unsafe fn rd32(p: *const c_void, off: usize) -> u32 {
    // SAFETY: the caller's promise; unaligned read for packed layouts.
    unsafe { (p as *const u8).add(off).cast::<u32>().read_unaligned() }
}

/// Writes a `u32` field at byte offset `off`.
///
/// # Safety
/// `p + off` must be writable for 4 bytes.
unsafe fn wr32(p: *mut c_void, off: usize, v: u32) {
    // SAFETY: the caller's promise.
    unsafe { (p as *mut u8).add(off).cast::<u32>().write_unaligned(v) }
}

/// Reads a `u64` field at byte offset `off`.
///
/// # Safety
/// `p + off` must be readable for 8 bytes.
pub(crate) unsafe fn rd64(p: *const c_void, off: usize) -> u64 {
    // SAFETY: the caller's promise.
    unsafe { (p as *const u8).add(off).cast::<u64>().read_unaligned() }
}

/// Writes a `u64` field at byte offset `off`.
///
/// # Safety
/// `p + off` must be writable for 8 bytes.
unsafe fn wr64(p: *mut c_void, off: usize, v: u64) {
    // SAFETY: the caller's promise.
    unsafe { (p as *mut u8).add(off).cast::<u64>().write_unaligned(v) }
}

// ---------------------------------------------------------------- devices

/// `drvError_t drvGetDevNum(uint32_t *num_dev)`.
#[no_mangle]
pub extern "C" fn drvGetDevNum(num: *mut u32) -> i32 {
    guard("drvGetDevNum", || {
        if num.is_null() {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: non-null output of the caller.
        unsafe { *num = devinfo::device_count() };
        DRV_ERROR_NONE
    })
}

/// `drvError_t drvGetDevIDs(uint32_t *devices, uint32_t len)`.
#[no_mangle]
pub extern "C" fn drvGetDevIDs(devices: *mut u32, len: u32) -> i32 {
    guard("drvGetDevIDs", || {
        if devices.is_null() || len < devinfo::device_count() {
            return DRV_ERROR_INVALID_VALUE;
        }
        for i in 0..devinfo::device_count() {
            // SAFETY: the caller's array holds `len` >= DEVICE_COUNT entries.
            unsafe { *devices.add(i as usize) = i };
        }
        DRV_ERROR_NONE
    })
}

fn check_dev(dev: u32) -> bool {
    dev < devinfo::device_count()
}

/// `drvError_t halDeviceCanAccessPeer(int *can_access_peer, uint32_t dev, uint32_t peer_dev)`:
/// the emulated devices share host memory, so each reaches the other.
#[no_mangle]
pub extern "C" fn halDeviceCanAccessPeer(can: *mut i32, dev: u32, peer: u32) -> i32 {
    guard("halDeviceCanAccessPeer", || {
        if can.is_null() || !check_dev(dev) || !check_dev(peer) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: non-null output.
        unsafe { *can = i32::from(dev != peer) };
        DRV_ERROR_NONE
    })
}

/// `drvError_t halDeviceEnableP2P(uint32_t dev, uint32_t peer_dev, uint32_t flag)`.
#[no_mangle]
pub extern "C" fn halDeviceEnableP2P(dev: u32, peer: u32, _flag: u32) -> i32 {
    guard("halDeviceEnableP2P", || p2p(dev, peer))
}

/// `drvError_t halDeviceDisableP2P(uint32_t dev, uint32_t peer_dev, uint32_t flag)`.
#[no_mangle]
pub extern "C" fn halDeviceDisableP2P(dev: u32, peer: u32, _flag: u32) -> i32 {
    guard("halDeviceDisableP2P", || p2p(dev, peer))
}

/// `drvError_t drvGetP2PStatus(uint32_t dev, uint32_t peer_dev, uint32_t *status)`: enabled.
#[no_mangle]
pub extern "C" fn drvGetP2PStatus(dev: u32, peer: u32, status: *mut u32) -> i32 {
    guard("drvGetP2PStatus", || {
        if status.is_null() {
            return DRV_ERROR_INVALID_VALUE;
        }
        let rc = p2p(dev, peer);
        // SAFETY: non-null output.
        unsafe { *status = u32::from(rc == DRV_ERROR_NONE) };
        rc
    })
}

fn p2p(dev: u32, peer: u32) -> i32 {
    if check_dev(dev) && check_dev(peer) && dev != peer {
        DRV_ERROR_NONE
    } else {
        DRV_ERROR_INVALID_VALUE
    }
}

/// `drvError_t drvDeviceGetPhyIdByIndex(uint32_t devIndex, uint32_t *phyId)`.
#[no_mangle]
pub extern "C" fn drvDeviceGetPhyIdByIndex(index: u32, phy: *mut u32) -> i32 {
    guard("drvDeviceGetPhyIdByIndex", || {
        if phy.is_null() || !check_dev(index) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: non-null output.
        unsafe { *phy = index };
        DRV_ERROR_NONE
    })
}

/// `drvError_t drvDeviceGetIndexByPhyId(uint32_t phyId, uint32_t *devIndex)`.
#[no_mangle]
pub extern "C" fn drvDeviceGetIndexByPhyId(phy: u32, index: *mut u32) -> i32 {
    guard("drvDeviceGetIndexByPhyId", || {
        if index.is_null() || !check_dev(phy) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: non-null output.
        unsafe { *index = phy };
        DRV_ERROR_NONE
    })
}

/// `drvError_t halGetDeviceInfo(uint32_t devId, int32_t moduleType, int32_t infoType, int64_t *value)`.
#[no_mangle]
pub extern "C" fn halGetDeviceInfo(dev: u32, module: i32, info: i32, value: *mut i64) -> i32 {
    guard("halGetDeviceInfo", || {
        crate::trace!("halGetDeviceInfo(dev {dev}, module {module}, info {info})");
        if value.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        match devinfo::value(module, info) {
            Some(v) => {
                // SAFETY: non-null output.
                unsafe { *value = v };
                DRV_ERROR_NONE
            }
            None => DRV_ERROR_NOT_SUPPORT,
        }
    })
}

/// `drvError_t halGetPhyDeviceInfo(uint32_t phyId, int32_t moduleType, int32_t infoType, int64_t *value)`.
#[no_mangle]
pub extern "C" fn halGetPhyDeviceInfo(phy: u32, module: i32, info: i32, value: *mut i64) -> i32 {
    halGetDeviceInfo(phy, module, info, value)
}

/// `drvError_t halGetSocVersion(uint32_t devId, char *soc_version, uint32_t len)`.
#[no_mangle]
pub extern "C" fn halGetSocVersion(dev: u32, out: *mut u8, len: u32) -> i32 {
    guard("halGetSocVersion", || {
        let name = devinfo::SOC_NAME.as_bytes();
        if out.is_null() || !check_dev(dev) || (len as usize) <= name.len() {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: `out` holds `len` > name.len() bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(name.as_ptr(), out, name.len());
            *out.add(name.len()) = 0;
        }
        DRV_ERROR_NONE
    })
}

/// `drvError_t halGetAPIVersion(int *halAPIVersion)`.
#[no_mangle]
pub extern "C" fn halGetAPIVersion(v: *mut i32) -> i32 {
    guard("halGetAPIVersion", || {
        if v.is_null() {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: non-null output.
        unsafe { *v = API_VERSION };
        DRV_ERROR_NONE
    })
}

/// Driver API version reported by `halGetAPIVersion`.
pub const API_VERSION: i32 = 0x072313;

/// `drvError_t drvDeviceOpen(void **device, uint32_t deviceId)`.
#[no_mangle]
pub extern "C" fn drvDeviceOpen(device: *mut *mut c_void, dev: u32) -> i32 {
    guard("drvDeviceOpen", || {
        if !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        if !device.is_null() {
            // SAFETY: non-null output; the handle is opaque to the runtime.
            unsafe { *device = std::ptr::null_mut::<c_void>().wrapping_add(dev as usize + 1) };
        }
        DRV_ERROR_NONE
    })
}

/// `drvError_t drvDeviceClose(uint32_t devId)`.
#[no_mangle]
pub extern "C" fn drvDeviceClose(dev: u32) -> i32 {
    guard("drvDeviceClose", || {
        if check_dev(dev) {
            DRV_ERROR_NONE
        } else {
            DRV_ERROR_INVALID_VALUE
        }
    })
}

/// `drvError_t halDeviceOpen(uint32_t devid, halDevOpenIn *in, halDevOpenOut *out)`: both
/// structures are reserved (zeros).
#[no_mangle]
pub extern "C" fn halDeviceOpen(dev: u32, _in: *mut c_void, _out: *mut c_void) -> i32 {
    guard("halDeviceOpen", || {
        if check_dev(dev) {
            DRV_ERROR_NONE
        } else {
            DRV_ERROR_INVALID_VALUE
        }
    })
}

/// `drvError_t halDeviceClose(uint32_t devid, halDevCloseIn *in)`.
#[no_mangle]
pub extern "C" fn halDeviceClose(dev: u32, _in: *mut c_void) -> i32 {
    guard("halDeviceClose", || {
        if check_dev(dev) {
            DRV_ERROR_NONE
        } else {
            DRV_ERROR_INVALID_VALUE
        }
    })
}

/// `DVresult drvMemSmmuQuery(DVdevice device, UINT32 *SSID)`: one address space, SSID 0.
#[no_mangle]
pub extern "C" fn drvMemSmmuQuery(dev: u32, ssid: *mut u32) -> i32 {
    guard("drvMemSmmuQuery", || {
        if ssid.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: non-null output.
        unsafe { *ssid = 0 };
        DRV_ERROR_NONE
    })
}

/// `drvError_t drvGetPlatformInfo(uint32_t *info)`: 1, `RT_RUN_MODE_ONLINE` (a host process
/// driving a PCIe device; `pkg_inc/runtime/runtime/dev.h`).
#[no_mangle]
pub extern "C" fn drvGetPlatformInfo(info: *mut u32) -> i32 {
    guard("drvGetPlatformInfo", || {
        if info.is_null() {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: non-null output.
        unsafe { *info = 1 };
        DRV_ERROR_NONE
    })
}

// ---------------------------------------------------------------- memory

/// `drvError_t halMemAlloc(void **pp, unsigned long long size, unsigned long long flag)`.
#[no_mangle]
pub extern "C" fn halMemAlloc(pp: *mut *mut c_void, size: u64, flag: u64) -> i32 {
    guard("halMemAlloc", || {
        crate::trace!("halMemAlloc(size {size}, flag {flag:#x})");
        if pp.is_null() || size == 0 {
            return DRV_ERROR_INVALID_VALUE;
        }
        match memory::alloc(size) {
            Some(a) => {
                // SAFETY: non-null output.
                unsafe { *pp = a as *mut c_void };
                DRV_ERROR_NONE
            }
            None => DRV_ERROR_OUT_OF_MEMORY,
        }
    })
}

/// `drvError_t halMemFree(void *pp)`.
#[no_mangle]
pub extern "C" fn halMemFree(p: *mut c_void) -> i32 {
    guard("halMemFree", || {
        if memory::free(p as usize) {
            DRV_ERROR_NONE
        } else {
            DRV_ERROR_INVALID_VALUE
        }
    })
}

/// `drvError_t drvMemcpy(DVdeviceptr dst, size_t destMax, DVdeviceptr src, size_t byteCount)`.
#[no_mangle]
pub extern "C" fn drvMemcpy(dst: u64, dest_max: usize, src: u64, count: usize) -> i32 {
    guard("drvMemcpy", || {
        crate::trace!("drvMemcpy({dst:#x} <- {src:#x}, {count} bytes)");
        if count > dest_max || !memory::copy(dst as usize, src as usize, count) {
            return DRV_ERROR_INVALID_VALUE;
        }
        DRV_ERROR_NONE
    })
}

/// `drvError_t drvMemsetD8(DVdeviceptr dst, size_t destMax, UINT8 value, size_t N)`.
#[no_mangle]
pub extern "C" fn drvMemsetD8(dst: u64, dest_max: usize, value: u8, n: usize) -> i32 {
    guard("drvMemsetD8", || {
        if n > dest_max || !memory::fill(dst as usize, value, n) {
            return DRV_ERROR_INVALID_VALUE;
        }
        DRV_ERROR_NONE
    })
}

/// `DVresult drvMemConvertAddr(DVdeviceptr pSrc, DVdeviceptr pDst, UINT32 len, struct DMA_ADDR *dma)`.
///
/// `struct DMA_ADDR` (40 bytes): phyAddr.src 0, phyAddr.dst 8, phyAddr.len 16, phyAddr.flag 20,
/// phyAddr.priv 24, fixed_size 32, virt_id 36. The emulation records (src, dst, len) and hands back
/// a descriptor handle in `phyAddr.src` with `len` 1 (one descriptor, chain flag set), the way a
/// chained conversion is described in `ascend_hal_base.h`.
#[no_mangle]
pub extern "C" fn drvMemConvertAddr(src: u64, dst: u64, len: u32, dma: *mut c_void) -> i32 {
    guard("drvMemConvertAddr", || {
        crate::trace!("drvMemConvertAddr({src:#x} -> {dst:#x}, {len} bytes)");
        if dma.is_null() || src == 0 || dst == 0 {
            return DRV_ERROR_INVALID_VALUE;
        }
        let h = memory::dma_create(src as usize, dst as usize, len as usize);
        // SAFETY: a `struct DMA_ADDR` (40 bytes).
        unsafe {
            wr64(dma, 0, h);
            wr64(dma, 8, dst);
            wr32(dma, 16, 1);
            *(dma as *mut u8).add(20) = 1;
            wr64(dma, 24, 0);
            wr32(dma, 32, len);
            wr32(dma, 36, 0);
        }
        DRV_ERROR_NONE
    })
}

/// `DVresult drvMemDestroyAddr(struct DMA_ADDR *ptr)`.
#[no_mangle]
pub extern "C" fn drvMemDestroyAddr(dma: *mut c_void) -> i32 {
    guard("drvMemDestroyAddr", || {
        if dma.is_null() {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: a `struct DMA_ADDR` filled by `drvMemConvertAddr`.
        let h = unsafe { rd64(dma, 0) };
        if memory::dma_destroy(h) {
            DRV_ERROR_NONE
        } else {
            DRV_ERROR_INVALID_VALUE
        }
    })
}

/// `DVresult halMemDestroyAddrBatch(struct DMA_ADDR *ptr[], uint32_t num)`.
#[no_mangle]
pub extern "C" fn halMemDestroyAddrBatch(ptrs: *mut *mut c_void, num: u32) -> i32 {
    guard("halMemDestroyAddrBatch", || {
        if ptrs.is_null() {
            return DRV_ERROR_INVALID_VALUE;
        }
        let mut rc = DRV_ERROR_NONE;
        for i in 0..num as usize {
            // SAFETY: the caller's array holds `num` pointers.
            let p = unsafe { *ptrs.add(i) };
            if drvMemDestroyAddr(p) != DRV_ERROR_NONE {
                rc = DRV_ERROR_INVALID_VALUE;
            }
        }
        rc
    })
}

// ---------------------------------------------------------------- queues

/// `drvError_t halSqCqAllocate(uint32_t devId, struct halSqCqInputInfo *in, struct halSqCqOutputInfo *out)`.
///
/// Input offsets: type 0, tsId 4, sqeSize 8, cqeSize 12, sqeDepth 16, cqeDepth 20, grpId 24,
/// flag 28, cqId 32, sqId 36, info[5] 40. Output: sqId 0, cqId 4, queueVAddr 8, flag 16.
#[no_mangle]
pub extern "C" fn halSqCqAllocate(dev: u32, input: *mut c_void, output: *mut c_void) -> i32 {
    guard("halSqCqAllocate", || {
        if input.is_null() || output.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: the runtime passes a `halSqCqInputInfo` (96 bytes) and a `halSqCqOutputInfo`
        // (40 bytes).
        unsafe {
            let ty = rd32(input, 0);
            let depth = rd32(input, 16);
            let flag = rd32(input, 28);
            let want_cq = rd32(input, 32);
            let want_sq = rd32(input, 36);
            let info0 = rd32(input, 40);
            crate::trace!(
                "halSqCqAllocate(type {ty}, sqeSize {}, cqeSize {}, sqeDepth {depth}, cqeDepth {}, flag {flag:#x}, cq {want_cq}, sq {want_sq}, info0 {info0})",
                rd32(input, 8),
                rd32(input, 12),
                rd32(input, 20)
            );
            match ty {
                DRV_NORMAL_TYPE => {
                    let want = (flag & TSDRV_FLAG_SPECIFIED_SQ_ID != 0).then_some(want_sq);
                    let Some((sq, cq)) = queue::alloc_sq(want, depth) else {
                        return DRV_ERROR_NO_RESOURCES;
                    };
                    wr32(output, 0, sq);
                    wr32(output, 4, cq);
                    wr64(output, 8, 0);
                }
                DRV_LOGIC_TYPE => {
                    let want = (flag & TSDRV_FLAG_SPECIFIED_CQ_ID != 0).then_some(want_cq);
                    let cq = queue::alloc_logic_cq(want, info0);
                    wr32(output, 0, 0);
                    wr32(output, 4, cq);
                    wr64(output, 8, 0);
                }
                DRV_CALLBACK_TYPE => {
                    // A callback CQ of group `grpId`: host-callback entries report here.
                    let Some(cq) = queue::alloc_callback_cq(rd32(input, 24)) else {
                        crate::trace!("callback CQ refused: {} in use", queue::CALLBACK_CQ_LIMIT);
                        return DRV_ERROR_NO_RESOURCES;
                    };
                    wr32(output, 0, cq);
                    wr32(output, 4, cq);
                    wr64(output, 8, 0);
                }
                _ => return DRV_ERROR_NOT_SUPPORT,
            }
        }
        DRV_ERROR_NONE
    })
}

/// `drvError_t halSqCqFree(uint32_t devId, struct halSqCqFreeInfo *info)` (type 0, tsId 4,
/// sqId 8, cqId 12, flag 16).
#[no_mangle]
pub extern "C" fn halSqCqFree(dev: u32, info: *mut c_void) -> i32 {
    guard("halSqCqFree", || {
        if info.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: a `halSqCqFreeInfo` (52 bytes).
        let (ty, sq, cq) = unsafe { (rd32(info, 0), rd32(info, 8), rd32(info, 12)) };
        let ok = match ty {
            DRV_LOGIC_TYPE => queue::free_logic_cq(cq),
            DRV_CALLBACK_TYPE => queue::free_callback_cq(cq),
            _ => queue::free_sq(sq),
        };
        if ok {
            DRV_ERROR_NONE
        } else {
            DRV_ERROR_INVALID_VALUE
        }
    })
}

/// `drvError_t halSqCqQuery(uint32_t devId, struct halSqCqQueryInfo *info)` (type 0, tsId 4,
/// sqId 8, cqId 12, prop 16, value[8] 20).
#[no_mangle]
pub extern "C" fn halSqCqQuery(dev: u32, info: *mut c_void) -> i32 {
    guard("halSqCqQuery", || {
        if info.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: a `halSqCqQueryInfo` (52 bytes).
        unsafe {
            let sq = rd32(info, 8);
            let prop = rd32(info, 16);
            let Some((head, tail, depth)) = queue::sq_state(sq) else {
                return DRV_ERROR_INVALID_VALUE;
            };
            if prop == DRV_SQCQ_PROP_SQ_REG_BASE {
                // value[0]: high 32 bits, value[1]: low 32 bits, value[2]: size
                // (`NpuDriver::GetSqRegVirtualAddrBySqid`).
                let page = queue::sq_reg_page(sq).unwrap_or(0) as u64;
                wr32(info, 20, (page >> 32) as u32);
                wr32(info, 24, page as u32);
                wr32(info, 28, queue::REG_PAGE_SIZE);
                return DRV_ERROR_NONE;
            }
            let v = match prop {
                DRV_SQCQ_PROP_SQ_HEAD => head,
                DRV_SQCQ_PROP_SQ_TAIL => tail,
                DRV_SQCQ_PROP_SQ_DEPTH => depth,
                DRV_SQCQ_PROP_SQ_STATUS | DRV_SQCQ_PROP_SQ_CQE_STATUS => 0,
                _ => return DRV_ERROR_NOT_SUPPORT,
            };
            crate::trace!("halSqCqQuery(sq {sq}, prop {prop}) = {v}");
            wr32(info, 20, v);
        }
        DRV_ERROR_NONE
    })
}

/// `drvError_t halSqTaskSend(uint32_t devId, struct halTaskSendInfo *info)` (type 0, tsId 4,
/// sqId 8, timeout 12, sqe_addr 16, sqe_num 24, pos 28).
#[no_mangle]
pub extern "C" fn halSqTaskSend(dev: u32, info: *mut c_void) -> i32 {
    guard("halSqTaskSend", || {
        if info.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: a `halTaskSendInfo` (64 bytes); `sqe_addr` holds `sqe_num` 64-byte entries.
        unsafe {
            let ty = rd32(info, 0);
            let sq = rd32(info, 8);
            let addr = rd64(info, 16) as *const [u8; queue::SQE_SIZE];
            let n = rd32(info, 24) as usize;
            if ty != DRV_NORMAL_TYPE {
                return DRV_ERROR_NOT_SUPPORT;
            }
            if addr.is_null() || n == 0 {
                return DRV_ERROR_INVALID_VALUE;
            }
            let entries = std::slice::from_raw_parts(addr, n);
            if !queue::submit(sq, entries) {
                return DRV_ERROR_INVALID_VALUE;
            }
            if let Some((_, tail, _)) = queue::sq_state(sq) {
                wr32(info, 28, tail);
            }
        }
        DRV_ERROR_NONE
    })
}

/// `drvError_t halCqReportRecv(uint32_t devId, struct halReportRecvInfo *info)` (type 0,
/// tsId 4, cqId 8, timeout 12 (ms), cqe_addr 16, cqe_num 24, report_cqe_num 28, stream_id 32,
/// task_id 36).
#[no_mangle]
pub extern "C" fn halCqReportRecv(dev: u32, info: *mut c_void) -> i32 {
    guard("halCqReportRecv", || {
        if info.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: a `halReportRecvInfo` (72 bytes); `cqe_addr` holds `cqe_num` 32-byte entries.
        unsafe {
            let ty = rd32(info, 0);
            let cq = rd32(info, 8);
            let timeout = rd32(info, 12) as i32;
            let out = rd64(info, 16) as *mut [u8; queue::CQE_SIZE];
            let max = rd32(info, 24) as usize;
            if ty != DRV_LOGIC_TYPE {
                wr32(info, 28, 0);
                return DRV_ERROR_NOT_SUPPORT;
            }
            if out.is_null() {
                return DRV_ERROR_INVALID_VALUE;
            }
            let Some(got) = queue::receive(cq, max, timeout) else {
                return DRV_ERROR_INVALID_VALUE;
            };
            for (i, e) in got.iter().enumerate() {
                out.add(i).write(*e);
            }
            wr32(info, 28, got.len() as u32);
            crate::trace!(
                "halCqReportRecv(cq {cq}, max {max}, timeout {timeout}) = {} entries",
                got.len()
            );
            if got.is_empty() {
                return DRV_ERROR_WAIT_TIMEOUT;
            }
        }
        DRV_ERROR_NONE
    })
}

// ---------------------------------------------------------------- resource ids

/// `drvError_t halResourceIdAlloc(uint32_t devId, struct halResourceIdInputInfo *in,
/// struct halResourceIdOutputInfo *out)` (in: type 0, tsId 4, resourceId 8; out: resourceId 0):
/// the lowest free id of the type, or the driver's exhaustion code at the chip's limit
/// ([`crate::limits`]).
#[no_mangle]
pub extern "C" fn halResourceIdAlloc(dev: u32, input: *mut c_void, output: *mut c_void) -> i32 {
    guard("halResourceIdAlloc", || {
        if input.is_null() || output.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: `halResourceIdInputInfo` (44 bytes) and `halResourceIdOutputInfo` (36 bytes).
        let ty = unsafe { rd32(input, 0) };
        let id = match limits::alloc(ty) {
            Ok(id) => id,
            Err(code) => {
                crate::trace!("halResourceIdAlloc(type {ty}) = no id left ({code})");
                return code;
            }
        };
        if ty == limits::DRV_EVENT_ID {
            queue::clear_event(id);
        }
        crate::trace!("halResourceIdAlloc(type {ty}) = {id}");
        // SAFETY: as above.
        unsafe { wr32(output, 0, id) };
        DRV_ERROR_NONE
    })
}

/// `drvError_t halResourceIdFree(uint32_t devId, struct halResourceIdInputInfo *in)`.
#[no_mangle]
pub extern "C" fn halResourceIdFree(dev: u32, input: *mut c_void) -> i32 {
    guard("halResourceIdFree", || {
        if input.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: a `halResourceIdInputInfo`.
        let (ty, id) = unsafe { (rd32(input, 0), rd32(input, 8)) };
        if !limits::free(ty, id) {
            return DRV_ERROR_INVALID_VALUE;
        }
        if ty == limits::DRV_EVENT_ID {
            queue::clear_event(id);
        }
        DRV_ERROR_NONE
    })
}

/// `drvError_t halResourceInfoQuery(uint32_t devId, uint32_t tsId, drvResourceType_t type,
/// struct halResourceInfo *info)` (capacity 0, usedNum 4, reserve[2] 8): the id space's size and
/// the ids in use; for `DRV_RESOURCE_SQ_ID` the live submission queues.
#[no_mangle]
pub extern "C" fn halResourceInfoQuery(dev: u32, _ts: u32, ty: u32, info: *mut c_void) -> i32 {
    guard("halResourceInfoQuery", || {
        if info.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        let (capacity, used) = match limits::query_type(ty) {
            Some(Some(id_type)) => (limits::capacity(id_type), limits::in_use(id_type)),
            Some(None) => (limits::SQ_LIMIT as u32, queue::live_sqs() as u32),
            None => return DRV_ERROR_NOT_SUPPORT,
        };
        crate::trace!("halResourceInfoQuery(type {ty}) = capacity {capacity}, used {used}");
        // SAFETY: a `struct halResourceInfo` of 16 bytes.
        unsafe {
            std::ptr::write_bytes(info as *mut u8, 0, 16);
            wr32(info, 0, capacity);
            wr32(info, 4, used);
        }
        DRV_ERROR_NONE
    })
}

// ---------------------------------------------------------------- misc

/// `pid_t drvDeviceGetBareTgid(void)`: the process id (host and "device" share the process).
#[no_mangle]
pub extern "C" fn drvDeviceGetBareTgid() -> i32 {
    // SAFETY: getpid has no preconditions.
    unsafe { libc::getpid() }
}

/// `void drvFlushCache(uint64_t base, uint32_t len)`: host memory is coherent; nothing to do.
#[no_mangle]
pub extern "C" fn drvFlushCache(_base: u64, _len: u32) {}

/// `void drvDfxShowReport(uint32_t devId)`: no report ring to show.
#[no_mangle]
pub extern "C" fn drvDfxShowReport(_dev: u32) {}

/// `drvError_t halGetChipCapability(uint32_t devId, struct halCapabilityInfo *info)`
/// (136 bytes: sdma_reduce_support, memory_support, ts_group_number, sdma_reduce_kind, res[30]):
/// the SDMA reduce kinds and types of [`crate::reduce`], HBM memory (`CAP_MEM_SUPPORT_HBM`), one TS
/// group.
#[no_mangle]
pub extern "C" fn halGetChipCapability(dev: u32, info: *mut c_void) -> i32 {
    guard("halGetChipCapability", || {
        if info.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: a `struct halCapabilityInfo` of 136 bytes.
        unsafe {
            std::ptr::write_bytes(info as *mut u8, 0, 136);
            wr32(info, 0, crate::reduce::REDUCE_TYPES);
            wr32(info, 4, 1);
            wr32(info, 8, 1);
            wr32(info, 12, crate::reduce::REDUCE_KINDS);
        }
        DRV_ERROR_NONE
    })
}

/// `drvError_t halResourceConfig(uint32_t devId, struct halResourceIdInputInfo *in,
/// struct halResourceConfigInfo *para)`: resource attributes (stream priority, …) are accepted;
/// nothing in this emulation depends on them.
#[no_mangle]
pub extern "C" fn halResourceConfig(dev: u32, input: *mut c_void, para: *mut c_void) -> i32 {
    guard("halResourceConfig", || {
        if input.is_null() || para.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: `halResourceIdInputInfo` and `halResourceConfigInfo` (prop first).
        let (ty, id, prop) = unsafe { (rd32(input, 0), rd32(input, 8), rd32(para, 0)) };
        crate::trace!("halResourceConfig(type {ty}, id {id}, prop {prop})");
        DRV_ERROR_NONE
    })
}

static MAPPED: Mutex<BTreeMap<u32, usize>> = Mutex::new(BTreeMap::new());

/// Size of each emulated register window handed out by `halMemCtl(CTRL_TYPE_ADDR_MAP)`.
const MAPPED_WINDOW: u64 = 4096;

/// `drvError_t halMemCtl(int type, void *param, size_t paramSize, void *out, size_t *outSize)`.
///
/// `CTRL_TYPE_ADDR_MAP` (0) with `struct AddrMapInPara {addr_type, devid}` →
/// `struct AddrMapOutPara {ptr, len}`: each register window (L2 buffer, C2C control, …) is a
/// zeroed page of emulated device memory; the runtime only embeds these addresses in kernel
/// entries. Every other control type: not supported.
#[no_mangle]
pub extern "C" fn halMemCtl(
    ty: i32,
    param: *mut c_void,
    param_size: usize,
    out: *mut c_void,
    out_size: *mut usize,
) -> i32 {
    guard("halMemCtl", || {
        crate::trace!("halMemCtl(type {ty}, param size {param_size})");
        if ty != 0 {
            return DRV_ERROR_NOT_SUPPORT;
        }
        if param.is_null() || out.is_null() || param_size < 8 {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: `AddrMapInPara` (8 bytes, checked) and `AddrMapOutPara` (16 bytes).
        unsafe {
            let addr_type = rd32(param, 0);
            if !check_dev(rd32(param, 4)) {
                return DRV_ERROR_INVALID_VALUE;
            }
            let mut m = lock(&MAPPED);
            let page = match m.get(&addr_type) {
                Some(&p) => p,
                None => {
                    let Some(p) = memory::alloc(MAPPED_WINDOW) else {
                        return DRV_ERROR_OUT_OF_MEMORY;
                    };
                    m.insert(addr_type, p);
                    p
                }
            };
            wr64(out, 0, page as u64);
            wr64(out, 8, MAPPED_WINDOW);
            if !out_size.is_null() {
                *out_size = 16;
            }
        }
        DRV_ERROR_NONE
    })
}

/// `DV_MEM_LOCK_DEV`: device memory.
const DV_MEM_LOCK_DEV: u32 = 0x10;
/// `DV_MEM_USER_MALLOC`: not a driver address (plain host memory).
const DV_MEM_USER_MALLOC: u32 = 0x80;

/// `DVresult drvMemGetAttribute(DVdeviceptr vptr, struct DVattribute *attr)` (memType 0,
/// devId 12, pageSize 16): emulated device memory is `DV_MEM_LOCK_DEV`, anything else
/// `DV_MEM_USER_MALLOC`.
#[no_mangle]
pub extern "C" fn drvMemGetAttribute(vptr: u64, attr: *mut c_void) -> i32 {
    guard("drvMemGetAttribute", || {
        if attr.is_null() {
            return DRV_ERROR_INVALID_VALUE;
        }
        let dev = memory::find(vptr as usize).is_some();
        // SAFETY: a `struct DVattribute` (52 bytes).
        unsafe {
            wr32(
                attr,
                0,
                if dev {
                    DV_MEM_LOCK_DEV
                } else {
                    DV_MEM_USER_MALLOC
                },
            );
            wr32(attr, 12, 0);
            wr32(attr, 16, memory::DEVICE_ALIGN as u32);
        }
        DRV_ERROR_NONE
    })
}

/// `drvError_t halHostRegister(void *src_ptr, UINT64 size, UINT32 flag, UINT32 devid,
/// void **dst_ptr)`: the device reaches host memory at the same address here, so `*dst_ptr` is
/// `src_ptr`; a range registered twice is refused with `DRV_ERROR_BUSY` as the driver does.
#[no_mangle]
pub extern "C" fn halHostRegister(
    src: *mut c_void,
    size: u64,
    flag: u32,
    dev: u32,
    dst: *mut *mut c_void,
) -> i32 {
    guard("halHostRegister", || {
        if dst.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        let Ok(len) = usize::try_from(size) else {
            return DRV_ERROR_INVALID_VALUE;
        };
        crate::trace!("halHostRegister({src:p}, {size} bytes, flag {flag:#x})");
        match memory::host_register(src as usize, len) {
            Ok(addr) => {
                // SAFETY: non-null output.
                unsafe { *dst = addr as *mut c_void };
                DRV_ERROR_NONE
            }
            Err(memory::RegisterError::Busy) => DRV_ERROR_BUSY,
            Err(memory::RegisterError::Invalid) => DRV_ERROR_INVALID_VALUE,
        }
    })
}

/// `drvError_t halHostUnregister(void *src_ptr, UINT32 devid)`.
#[no_mangle]
pub extern "C" fn halHostUnregister(src: *mut c_void, dev: u32) -> i32 {
    guard("halHostUnregister", || unregister(src, dev))
}

/// `drvError_t halHostUnregisterEx(void *src_ptr, UINT32 devid, UINT32 flag)`: as
/// `halHostUnregister` (the flag only names the mapping kind).
#[no_mangle]
pub extern "C" fn halHostUnregisterEx(src: *mut c_void, dev: u32, _flag: u32) -> i32 {
    guard("halHostUnregisterEx", || unregister(src, dev))
}

fn unregister(src: *mut c_void, dev: u32) -> i32 {
    if !check_dev(dev) || !memory::host_unregister(src as usize) {
        return DRV_ERROR_INVALID_VALUE;
    }
    DRV_ERROR_NONE
}

/// `DVresult drvMemAddressTranslate(DVdeviceptr vptr, UINT64 *pptr)`: the emulated device's
/// "physical" address is its virtual one; non-device addresses are refused.
#[no_mangle]
pub extern "C" fn drvMemAddressTranslate(vptr: u64, pptr: *mut u64) -> i32 {
    guard("drvMemAddressTranslate", || {
        if pptr.is_null() || memory::find(vptr as usize).is_none() {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: non-null output.
        unsafe { *pptr = vptr };
        DRV_ERROR_NONE
    })
}

/// `drvError_t drvDeviceGetTransWay(void *src, void *dest, uint8_t *trans_type)`: `DRV_SDMA` (0)
/// between two device addresses, `DRV_PCIE_DMA` (1) when one side is host memory.
#[no_mangle]
pub extern "C" fn drvDeviceGetTransWay(src: *mut c_void, dst: *mut c_void, way: *mut u8) -> i32 {
    guard("drvDeviceGetTransWay", || {
        if way.is_null() {
            return DRV_ERROR_INVALID_VALUE;
        }
        let both = memory::find(src as usize).is_some() && memory::find(dst as usize).is_some();
        // SAFETY: non-null output.
        unsafe { *way = if both { 0 } else { 1 } };
        DRV_ERROR_NONE
    })
}

/// `drvError_t halReportRelease(uint32_t devId, struct halReportReleaseInfo *info)` (type 0,
/// tsId 4, cqId 8, count 12): releases `count` reports `halCqReportGet` handed out for a
/// callback CQ (their buffer is freed with its last report); logic-CQ entries are removed when
/// received, so nothing is left to release there.
#[no_mangle]
pub extern "C" fn halReportRelease(dev: u32, info: *mut c_void) -> i32 {
    guard("halReportRelease", || {
        if info.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: a `halReportReleaseInfo` (48 bytes).
        let (ty, cq, count) = unsafe { (rd32(info, 0), rd32(info, 8), rd32(info, 12)) };
        if ty == DRV_CALLBACK_TYPE {
            queue::release_callbacks(cq, count as usize);
        }
        DRV_ERROR_NONE
    })
}

/// `drvError_t halCqReportIrqWait(uint32_t devId, struct halReportInfoInput *in,
/// struct halReportInfoOutput *out)` (in: type 0, grpId 4, tsId 8, timeout 12 ms; out:
/// cqIdBitmap 0 (pointer to 64-bit words), cqIdBitmapSize 8 (words)). For callback CQs: waits
/// until one of the group has reports and sets its bit; `DRV_ERROR_WAIT_TIMEOUT` otherwise.
#[no_mangle]
pub extern "C" fn halCqReportIrqWait(dev: u32, input: *mut c_void, output: *mut c_void) -> i32 {
    guard("halCqReportIrqWait", || {
        if input.is_null() || output.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: `halReportInfoInput` and `halReportInfoOutput` (48 bytes each); the bitmap holds
        // `cqIdBitmapSize` words.
        unsafe {
            if rd32(input, 0) != DRV_CALLBACK_TYPE {
                return DRV_ERROR_NOT_SUPPORT;
            }
            let group = rd32(input, 4);
            let timeout = rd32(input, 12) as i32;
            let bitmap = rd64(output, 0) as *mut u64;
            let words = rd32(output, 8) as usize;
            if bitmap.is_null() || words == 0 {
                return DRV_ERROR_INVALID_VALUE;
            }
            std::ptr::write_bytes(bitmap, 0, words);
            let ready = queue::wait_callbacks(group, timeout);
            let mut any = false;
            for cq in ready {
                let (w, b) = ((cq / 64) as usize, cq % 64);
                if w < words {
                    *bitmap.add(w) |= 1u64 << b;
                    any = true;
                }
            }
            if any {
                DRV_ERROR_NONE
            } else {
                DRV_ERROR_WAIT_TIMEOUT
            }
        }
    })
}

/// `drvError_t halCqReportGet(uint32_t devId, struct halReportGetInput *in,
/// struct halReportGetOutput *out)` (in: type 0, tsId 4, cqId 8; out: count 0, reportPtr 8):
/// the pending `rtHostFuncCqReport_t` entries of a callback CQ, valid until `halReportRelease`.
#[no_mangle]
pub extern "C" fn halCqReportGet(dev: u32, input: *mut c_void, output: *mut c_void) -> i32 {
    guard("halCqReportGet", || {
        if input.is_null() || output.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: `halReportGetInput` (44 bytes) and `halReportGetOutput` (48 bytes).
        unsafe {
            if rd32(input, 0) != DRV_CALLBACK_TYPE {
                return DRV_ERROR_NOT_SUPPORT;
            }
            let Some((addr, n)) = queue::take_callbacks(rd32(input, 8)) else {
                return DRV_ERROR_INVALID_VALUE;
            };
            wr32(output, 0, n as u32);
            wr64(output, 8, if n == 0 { 0 } else { addr as u64 });
        }
        DRV_ERROR_NONE
    })
}

thread_local! {
    /// The command slot `halSqMemGet` lends to the calling thread (one 64-byte command).
    static COMMAND: std::cell::RefCell<Box<[u8; 64]>> = std::cell::RefCell::new(Box::new([0u8; 64]));
}

/// `drvError_t halSqMemGet(uint32_t devId, struct halSqMemGetInput *in,
/// struct halSqMemGetOutput *out)` (in: type 0, tsId 4, sqId 8, cmdCount 12; out: cmdCount 0,
/// cmdPtr 8): lends the calling thread one zeroed 64-byte command slot.
#[no_mangle]
pub extern "C" fn halSqMemGet(dev: u32, input: *mut c_void, output: *mut c_void) -> i32 {
    guard("halSqMemGet", || {
        if input.is_null() || output.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: `halSqMemGetInput` / `halSqMemGetOutput` (48 bytes each).
        unsafe {
            if rd32(input, 12) != 1 {
                return DRV_ERROR_NOT_SUPPORT;
            }
            let ptr = COMMAND.with(|c| {
                let mut c = c.borrow_mut();
                c.fill(0);
                c.as_mut_ptr() as u64
            });
            wr32(output, 0, 1);
            wr64(output, 8, ptr);
        }
        DRV_ERROR_NONE
    })
}

/// `STARS_CALLBACK_EVENT_RECORD_CMDTYPE` (`core/inc/stars/stars.hpp`).
const CALLBACK_EVENT_RECORD: u8 = 15;

/// `drvError_t halSqMsgSend(uint32_t devId, struct halSqMsgInfo *info)` (type 0, tsId 4, sqId 8,
/// cmdCount 12, reportCount 16): for `DRV_CALLBACK_TYPE`, the command in the thread's slot is the
/// runtime's reply to a blocking host callback (`rtHostFuncRecordCommand_t`: cmdType 4,
/// streamId 8, recordId 10, taskId 12); cmdType 15 records event `recordId`, releasing the
/// stream's wait on it.
#[no_mangle]
pub extern "C" fn halSqMsgSend(dev: u32, info: *mut c_void) -> i32 {
    guard("halSqMsgSend", || {
        if info.is_null() || !check_dev(dev) {
            return DRV_ERROR_INVALID_VALUE;
        }
        // SAFETY: a `halSqMsgInfo` (52 bytes).
        let ty = unsafe { rd32(info, 0) };
        if ty != DRV_CALLBACK_TYPE {
            return DRV_ERROR_NOT_SUPPORT;
        }
        let (cmd, record) = COMMAND.with(|c| {
            let c = c.borrow();
            (c[4], u32::from(u16::from_le_bytes([c[10], c[11]])))
        });
        crate::trace!("halSqMsgSend(callback reply, cmdType {cmd}, recordId {record})");
        if cmd != CALLBACK_EVENT_RECORD {
            return DRV_ERROR_NOT_SUPPORT;
        }
        queue::record_event(record);
        DRV_ERROR_NONE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_calls_name_two_distinct_emulated_devices() {
        let mut can = -1;
        // Device 1 exists only with XSTREAM_HAL_SIM_DEVICES=2 (unset in unit tests).
        assert_eq!(devinfo::device_count(), 1);
        assert_eq!(
            halDeviceCanAccessPeer(&mut can, 0, 1),
            DRV_ERROR_INVALID_VALUE
        );
        assert_eq!(halDeviceCanAccessPeer(&mut can, 0, 0), DRV_ERROR_NONE);
        assert_eq!(can, 0, "a device is not its own peer");
        assert_eq!(halDeviceEnableP2P(0, 0, 0), DRV_ERROR_INVALID_VALUE);
        let mut status = 7;
        assert_eq!(drvGetP2PStatus(0, 1, &mut status), DRV_ERROR_INVALID_VALUE);
        assert_eq!(status, 0);
    }
}
