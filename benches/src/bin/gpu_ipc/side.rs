//! What each process holds: the devices, the source buffer (the exporter's own allocation, or
//! in the child its IPC import), destinations, streams, page-locked blocks and the interprocess
//! events, once through the raw driver and once through xstream, and the one copy routine
//! both processes time.

use std::time::Instant;

use cudarc::driver::sys;
use xstream_core::{
    Backend, Device, EventDesc, EventFlags, IpcBuffer, IpcEvent, IpcEventHandle, IpcMemHandle,
    PinnedAllocDesc, PinnedBuffer, Stream, StreamDesc, StreamFlags,
};
use xstream_cuda::{CudaBackend, CudaBuffer, CudaDevice, CudaEvent, CudaStream};

use super::raw::{self, Ctx};
use super::{trace, xe, BenchResult, CopyKind, Variant};

/// The byte the exporter writes into its raw-driver buffer (the child checks it).
pub(crate) const RAW_FILL: u8 = 0xa5;
/// The byte the exporter writes into its xstream buffer.
pub(crate) const XS_FILL: u8 = 0x5a;

/// The four handles the exporter hands the child.
pub(crate) struct Handles {
    pub(crate) raw_event: [u8; 64],
    pub(crate) xs_event: IpcEventHandle,
    pub(crate) raw_mem: [u8; 64],
    pub(crate) xs_mem: IpcMemHandle,
}

impl Handles {
    /// One line: four hex words.
    pub(crate) fn to_line(&self) -> String {
        format!(
            "{} {} {} {}",
            raw::hex(&self.raw_event),
            self.xs_event.to_hex(),
            raw::hex(&self.raw_mem),
            self.xs_mem.to_hex()
        )
    }

    pub(crate) fn from_line(s: &str) -> BenchResult<Self> {
        let w: Vec<&str> = s.split_whitespace().collect();
        let [re, xe_, rm, xm] = w[..] else {
            return Err(format!("four handles expected, got {}", w.len()));
        };
        Ok(Self {
            raw_event: raw::unhex64(re)?,
            xs_event: IpcEventHandle::from_hex(xe_).map_err(xe)?,
            raw_mem: raw::unhex64(rm)?,
            xs_mem: IpcMemHandle::from_hex(xm).map_err(xe)?,
        })
    }
}

/// One process's objects. Device 0 holds the source and the events; the consumer device
/// (device 0 again with one GPU, device 1 with two) holds the copy destinations and the
/// streams that copy between devices and wait on the events.
pub(crate) struct Side {
    pub(crate) two: bool,
    pub(crate) len: usize,
    pub(crate) dev0: CudaDevice,
    pub(crate) devc: CudaDevice,
    pub(crate) ctx0: Ctx,
    pub(crate) ctxc: Ctx,
    imported: bool,
    src_raw: u64,
    src_xs: CudaBuffer,
    dst_raw: u64,
    dst_xs: CudaBuffer,
    /// Streams of the consumer device: device-to-device copies, and the child's stream waits.
    pub(crate) sc_raw: sys::CUstream,
    pub(crate) sc_xs: CudaStream,
    /// Streams of device 0: device-to-host copies, and the parent's kernels and records.
    pub(crate) s0_raw: sys::CUstream,
    pub(crate) s0_xs: CudaStream,
    pin_raw: *mut u8,
    pin_xs: PinnedBuffer<CudaBackend>,
    pub(crate) ev_raw: sys::CUevent,
    pub(crate) ev_xs: CudaEvent,
    /// With two GPUs: a stream and an ordinary event of device 0 through which the raw side's
    /// stream on device 1 waits for the interprocess event (`raw::wait_bridged_and_sync`).
    pub(crate) bridge_raw: sys::CUstream,
    pub(crate) relay_raw: sys::CUevent,
}

impl Side {
    /// The exporter (`from == None`: allocates and fills the sources, creates the events) or
    /// the importer (opens the exporter's handles). `consumer` is the consumer device's ordinal.
    pub(crate) fn new(consumer: usize, len: usize, from: Option<&Handles>) -> BenchResult<Self> {
        trace(&format!("side: open device 0 (consumer {consumer})"));
        let dev0 = CudaBackend::open(0).map_err(xe)?;
        let devc = if consumer == 0 {
            dev0.clone()
        } else {
            let d = CudaBackend::open(consumer).map_err(xe)?;
            trace("side: enable peer access consumer -> device 0");
            d.enable_peer_access(&dev0)
                .map_err(|e| format!("device {consumer} -> device 0 peer access: {e}"))?;
            // And device 0 -> consumer: without it the peer copy from an import opened in
            // device 0's context ran at about a tenth of the exporter's rate, raw and xstream
            // alike (GPU run 21's `diag:` lines, docs/performance.md); with it, at the
            // exporter's rate.
            trace("side: enable peer access device 0 -> consumer");
            dev0.enable_peer_access(&d)
                .map_err(|e| format!("device 0 -> device {consumer} peer access: {e}"))?;
            d
        };
        let ctx0 = dev0.cudarc_context().cu_ctx();
        let ctxc = devc.cudarc_context().cu_ctx();
        let nb = StreamDesc::new().flags(StreamFlags::NON_BLOCKING);

        // xstream's objects first, then the raw ones (xstream keeps a per-thread record of the
        // context it bound; `rebind_thread` after raw calls that switched contexts).
        dev0.rebind_thread().map_err(xe)?;
        let s0_xs = dev0.create_stream(&nb).map_err(xe)?;
        let pin_xs = dev0
            .alloc_pinned(len, &PinnedAllocDesc::new())
            .map_err(xe)?;
        let (src_xs, ev_xs) = match from {
            None => {
                let b = dev0.alloc(len).map_err(xe)?;
                s0_xs.memset(&b, 0, len, XS_FILL).map_err(xe)?;
                s0_xs.synchronize().map_err(xe)?;
                let e = dev0
                    .create_event(&EventDesc::new().flags(EventFlags::INTERPROCESS))
                    .map_err(xe)?;
                (b, e)
            }
            Some(h) => {
                trace("side: xstream open_ipc memory on device 0");
                let b = CudaBuffer::open_ipc(&dev0, &h.xs_mem).map_err(xe)?;
                trace("side: xstream open_ipc event on device 0");
                (b, CudaEvent::open_ipc(&dev0, &h.xs_event).map_err(xe)?)
            }
        };
        trace("side: consumer stream and destination");
        devc.rebind_thread().map_err(xe)?;
        let sc_xs = devc.create_stream(&nb).map_err(xe)?;
        let dst_xs = devc.alloc(len).map_err(xe)?;

        trace("side: raw objects");
        let s0_raw = raw::stream(ctx0)?;
        let pin_raw = raw::host_alloc(ctx0, len)?;
        let (src_raw, ev_raw) = match from {
            None => {
                let p = raw::alloc(ctx0, len)?;
                raw::memset(ctx0, p, RAW_FILL, len)?;
                (p, raw::ipc_event(ctx0)?)
            }
            Some(h) => {
                trace("side: raw cuIpcOpenMemHandle on device 0");
                let p = raw::ipc_open_mem(ctx0, h.raw_mem)?;
                trace("side: raw cuIpcOpenEventHandle on device 0");
                (p, raw::ipc_open_event(ctx0, h.raw_event)?)
            }
        };
        let sc_raw = raw::stream(ctxc)?;
        let dst_raw = raw::alloc(ctxc, len)?;
        let (bridge_raw, relay_raw) = if consumer != 0 {
            (raw::stream(ctx0)?, raw::plain_event(ctx0)?)
        } else {
            (std::ptr::null_mut(), std::ptr::null_mut())
        };
        trace("side: ready");
        Ok(Self {
            two: consumer != 0,
            len,
            dev0,
            devc,
            ctx0,
            ctxc,
            imported: from.is_some(),
            src_raw,
            src_xs,
            dst_raw,
            dst_xs,
            sc_raw,
            sc_xs,
            s0_raw,
            s0_xs,
            pin_raw,
            pin_xs,
            ev_raw,
            ev_xs,
            bridge_raw,
            relay_raw,
        })
    }

    /// The exporter's handles.
    pub(crate) fn export(&self) -> BenchResult<Handles> {
        let raw_event = raw::ipc_event_handle(self.ctx0, self.ev_raw)?;
        let raw_mem = raw::ipc_mem_handle(self.ctx0, self.src_raw)?;
        self.dev0.rebind_thread().map_err(xe)?;
        Ok(Handles {
            raw_event,
            xs_event: self.ev_xs.export_ipc().map_err(xe)?,
            raw_mem,
            xs_mem: self.src_xs.export_ipc().map_err(xe)?,
        })
    }

    /// Makes the context `v`'s next `kind` copies run in current (outside any timing).
    fn bind_for_copy(&self, kind: CopyKind, v: Variant) -> BenchResult<()> {
        match (kind, v) {
            (CopyKind::DtoD, Variant::Raw) => raw::bind(self.ctxc),
            (CopyKind::DtoH, Variant::Raw) => raw::bind(self.ctx0),
            (CopyKind::DtoD, Variant::Xs) => self.devc.rebind_thread().map_err(xe),
            (CopyKind::DtoH, Variant::Xs) => self.dev0.rebind_thread().map_err(xe),
        }
    }

    /// `count` copies of the whole source (to the destination buffer, or to the page-locked
    /// block), enqueued back to back on one stream, then that stream synchronized: the host
    /// nanoseconds from the first enqueue to the synchronize's return.
    ///
    /// The same code runs in the exporter (source: its own allocation) and in the child
    /// (source: the import), so the two differ only in where the source came from. With two
    /// GPUs the device-to-device copy crosses devices (`cuMemcpyPeerAsync` / `copy_peer`, on
    /// a stream of device 1); device-to-host copies run on device 0.
    pub(crate) fn copy_batch(
        &mut self,
        kind: CopyKind,
        v: Variant,
        count: u64,
    ) -> BenchResult<u64> {
        let len = self.len;
        self.bind_for_copy(kind, v)?;
        let t0 = Instant::now();
        for _ in 0..count {
            match (kind, v) {
                (CopyKind::DtoD, Variant::Raw) if self.two => raw::copy_peer(
                    self.ctxc,
                    self.dst_raw,
                    self.ctx0,
                    self.src_raw,
                    len,
                    self.sc_raw,
                )?,
                (CopyKind::DtoD, Variant::Raw) => {
                    raw::copy_dtod(self.dst_raw, self.src_raw, len, self.sc_raw)?
                }
                (CopyKind::DtoD, Variant::Xs) if self.two => self
                    .sc_xs
                    .copy_peer(&self.src_xs, 0, &self.dst_xs, 0, len)
                    .map_err(xe)?,
                (CopyKind::DtoD, Variant::Xs) => self
                    .sc_xs
                    .copy(&self.src_xs, 0, &self.dst_xs, 0, len)
                    .map_err(xe)?,
                (CopyKind::DtoH, Variant::Raw) => {
                    raw::copy_dtoh(self.pin_raw, self.src_raw, len, self.s0_raw)?
                }
                (CopyKind::DtoH, Variant::Xs) => self
                    .s0_xs
                    .copy_to_host(&self.src_xs, 0, &mut self.pin_xs, 0, len)
                    .map_err(xe)?,
            }
        }
        match (kind, v) {
            (CopyKind::DtoD, Variant::Raw) => raw::sync(self.sc_raw)?,
            (CopyKind::DtoH, Variant::Raw) => raw::sync(self.s0_raw)?,
            (CopyKind::DtoD, Variant::Xs) => self.sc_xs.synchronize().map_err(xe)?,
            (CopyKind::DtoH, Variant::Xs) => self.s0_xs.synchronize().map_err(xe)?,
        }
        Ok(u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// With two GPUs, in the child: `diag::import_copies` over this side's raw import,
    /// destination and consumer stream (`handle`: the exporter's raw memory handle).
    pub(crate) fn diag_import_copies(&self, handle: [u8; 64]) {
        if self.two && self.imported {
            super::diag::import_copies(
                self.ctx0,
                self.ctxc,
                self.src_raw,
                self.dst_raw,
                self.sc_raw,
                handle,
                self.len,
            );
        }
    }

    /// Copies both sources to the page-locked blocks and checks first, middle and last byte
    /// against the fill bytes: proof that the child's imports map the exporter's memory.
    pub(crate) fn check_contents(&mut self) -> BenchResult<()> {
        self.copy_batch(CopyKind::DtoH, Variant::Raw, 1)?;
        self.copy_batch(CopyKind::DtoH, Variant::Xs, 1)?;
        let at = [0, self.len / 2, self.len - 1];
        for &i in &at {
            let r = raw::host_byte(self.pin_raw, i);
            if r != RAW_FILL {
                return Err(format!(
                    "raw import: byte {i} is {r:#04x}, the exporter wrote {RAW_FILL:#04x}"
                ));
            }
        }
        let xs = self.pin_xs.as_slice().map_err(xe)?;
        for &i in &at {
            if xs[i] != XS_FILL {
                return Err(format!(
                    "xstream import: byte {i} is {:#04x}, the exporter wrote {XS_FILL:#04x}",
                    xs[i]
                ));
            }
        }
        Ok(())
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        // Raw resources; every copy was synchronized by `copy_batch`, and the exporter drops
        // its side only after the child exited. Streams and events go with the process.
        trace("side drop: raw frees");
        raw::free(self.ctxc, self.dst_raw);
        raw::host_free(self.ctx0, self.pin_raw);
        if self.imported {
            trace("side drop: raw cuIpcCloseMemHandle");
            raw::ipc_close_mem(self.ctx0, self.src_raw);
        } else {
            raw::free(self.ctx0, self.src_raw);
        }
        trace("side drop: xstream objects");
        // xstream's objects drop after this, with its context record made current again.
        let _ = self.dev0.rebind_thread();
    }
}
