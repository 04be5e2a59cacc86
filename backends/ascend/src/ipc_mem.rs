//! Interprocess buffers on Ascend: [`IpcBuffer`] for [`AscendBuffer`] through
//! `aclrtIpcMemGetExportKey` / `aclrtIpcMemSetImportPid` / `aclrtIpcMemImportByKey` /
//! `aclrtIpcMemClose` (optional symbols; prototypes from the public
//! `include/external/acl/acl_rt.h`).
//!
//! The handle's payload is the export key (a C string of at most 64 bytes). ACL lets only
//! whitelisted processes import: [`IpcBuffer::export_ipc_range`] exports with
//! `ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION` (any process may import, as on host
//! and CUDA); [`IpcBuffer::export_ipc_range_for`] exports with the default flag and puts the
//! given process ids on the whitelist (`aclrtIpcMemSetImportPid`). An import is closed with
//! `aclrtIpcMemClose(key)` when its last clone drops (after the device's queued work); the
//! exporter's buffer frees the memory as usual (`aclrtFree`).
//!
//! [`IpcBuffer`]: xstream_core::IpcBuffer
//! [`IpcBuffer::export_ipc_range`]: xstream_core::IpcBuffer::export_ipc_range
//! [`IpcBuffer::export_ipc_range_for`]: xstream_core::IpcBuffer::export_ipc_range_for

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::{Arc, Mutex, OnceLock};

use xstream_core::{BackendKind, Buffer, Error, IpcBufferImpl, IpcMemHandle, Result};

use crate::device::{AscendBuffer, AscendDevice, BufInner};
use crate::result::ipc_mem as ipc;
use crate::sys::DevPtr;

/// `ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION` (`acl/acl_rt.h`).
const ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION: u64 = 0x1;

use xstream_core::sync::lock;

/// Open imports: (device ordinal, address) → key.
fn imports() -> &'static Mutex<HashMap<(usize, usize), CString>> {
    static M: OnceLock<Mutex<HashMap<(usize, usize), CString>>> = OnceLock::new();
    M.get_or_init(Default::default)
}

/// Keys this process exported (opening one here is refused, the portable rule).
fn exported() -> &'static Mutex<std::collections::HashSet<Vec<u8>>> {
    static M: OnceLock<Mutex<std::collections::HashSet<Vec<u8>>>> = OnceLock::new();
    M.get_or_init(Default::default)
}

/// Closes `ptr` with `aclrtIpcMemClose` (after the device's queued work, on the reaper thread)
/// when it is an import; `false` otherwise.
pub(crate) fn close_if_import(device: &AscendDevice, ptr: DevPtr) -> bool {
    let d = &device.inner;
    let Some(key) = lock(imports()).remove(&(d.info.ordinal, ptr.0 as usize)) else {
        return false;
    };
    let device = device.clone();
    crate::callback::reap(Box::new(move || {
        let d = &device.inner;
        if d.bind().is_ok() {
            let _ = crate::result::device::synchronize(d.t);
            let _ = ipc::close(d.t, &key);
        }
    }));
    true
}

fn export(
    buf: &AscendBuffer,
    offset: usize,
    len: usize,
    pids: Option<&[u32]>,
) -> Result<IpcMemHandle> {
    let inner = &buf.inner;
    if inner.ordered.is_some() {
        return Err(Error::invalid(
            "a stream-ordered (alloc_async) Ascend buffer cannot be exported",
        ));
    }
    let d = &inner.device.inner;
    if lock(imports()).contains_key(&(d.info.ordinal, inner.ptr.0 as usize)) {
        return Err(Error::invalid(
            "an imported Ascend buffer cannot be exported again",
        ));
    }
    let mut list = pids
        .unwrap_or(&[])
        .iter()
        .map(|&p| i32::try_from(p).map_err(|_| Error::invalid(format!("process id {p}"))))
        .collect::<Result<Vec<i32>>>()?;
    d.bind()?;
    let flags = if pids.is_some() {
        0
    } else {
        ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION
    };
    let key = ipc::export_key(d.t, inner.ptr, buf.len(), flags)?;
    if key.is_empty() {
        return Err(Error::invalid(
            "aclrtIpcMemGetExportKey returned an empty key",
        ));
    }
    if !list.is_empty() {
        let k = CString::new(key.clone())
            .map_err(|_| Error::invalid("an Ascend IPC memory key with a NUL byte"))?;
        ipc::set_import_pid(d.t, &k, &mut list)?;
    }
    let h = IpcMemHandle::new(BackendKind::Ascend, d.info.ordinal, offset, len, &key)?;
    lock(exported()).insert(key);
    Ok(h)
}

impl IpcBufferImpl for AscendBuffer {
    fn export_ipc_range_impl(
        &self,
        offset: usize,
        len: usize,
        pids: Option<&[u32]>,
    ) -> Result<IpcMemHandle> {
        export(self, offset, len, pids)
    }

    fn open_ipc_impl(device: &AscendDevice, handle: &IpcMemHandle) -> Result<Self> {
        let d = &device.inner;
        if lock(exported()).contains(handle.payload()) {
            return Err(Error::invalid(
                "an IPC memory handle exported by this very process (use the buffer itself)",
            ));
        }
        let key = CString::new(handle.payload())
            .map_err(|_| Error::invalid("an Ascend IPC memory key with a NUL byte"))?;
        d.bind()?;
        let base = ipc::import_by_key(d.t, &key)?;
        // The exporter's range: its offset within the imported block.
        let ptr = DevPtr((base.0 as *mut u8).wrapping_add(handle.offset()) as *mut c_void);
        lock(imports()).insert((d.info.ordinal, ptr.0 as usize), key);
        Ok(AscendBuffer {
            inner: Arc::new(BufInner {
                device: device.clone(),
                ptr,
                len: handle.len(),
                ordered: None,
                leaked: std::sync::atomic::AtomicBool::new(false),
                mapped: None,
            }),
        })
    }
}
