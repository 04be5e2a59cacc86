//! Raw buffers: `Buffer::into_raw`, `Buffer::from_raw` and `Buffer::from_raw_borrowed`
//! (`xstream_core::raw`).
//!
//! Whether an allocation is still live is observed where this process can tell: on the host
//! backend and on CUDA (plain allocations) through `from_raw_borrowed`, which refuses memory
//! that is no live allocation (the host backend's registry, `cuMemGetAddressRange`); on the
//! ACL runtime simulator through its allocation table (`xsimAllocRequested`). Elsewhere (a
//! real CANN runtime) the frees are not observed and the check says so.

use std::time::Instant;

use xstream_core::module::{lcg_launch, BUILTIN_LCG};
use xstream_core::{
    lcg_reference, Backend, BackendKind, Buffer, BufferView, Capabilities, Device, Error,
    KernelArg, Module, RawAlloc, RawBuffer, Stream,
};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env, GATE_LIMIT};

/// Whether `raw`'s memory is still a live allocation; `None` where this process cannot tell.
fn live<B: Backend>(env: &Env<B>, raw: RawBuffer) -> Result<Option<bool>, String> {
    match B::KIND {
        BackendKind::Host | BackendKind::Cuda => {
            // SAFETY: on these backends a descriptor of memory that is not live is refused
            // (the host registry, cuMemGetAddressRange); the probe is dropped at once and
            // never frees.
            let r = unsafe { B::Buffer::from_raw_borrowed(&env.device, raw) };
            match r {
                Ok(b) => {
                    drop(b);
                    Ok(Some(true))
                }
                Err(Error::InvalidArgument(_)) => Ok(Some(false)),
                Err(e) => Err(format!("liveness probe of {raw:?}: {e}")),
            }
        }
        BackendKind::Ascend if crate::simulator::configured(2) => Ok(Some(
            crate::simulator::Controls::get().alloc_requested(raw.address) != 0,
        )),
        BackendKind::Ascend => Ok(None),
    }
}

/// Waits (at most [`GATE_LIMIT`], a hang guard) until `raw` is no longer live; whether it
/// got there, `None` where liveness cannot be observed. Frees can be deferred (Ascend frees
/// on a reaper thread once the device's work completed).
fn freed<B: Backend>(env: &Env<B>, raw: RawBuffer) -> Result<Option<bool>, String> {
    let start = Instant::now();
    loop {
        match live(env, raw)? {
            None => return Ok(None),
            Some(false) => return Ok(Some(true)),
            Some(true) if start.elapsed() > GATE_LIMIT => return Ok(Some(false)),
            Some(true) => std::thread::sleep(std::time::Duration::from_millis(1)),
        }
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 3) as u8).collect()
}

/// Expects `r` to be refused with an error that `ok` accepts.
fn refused<T: std::fmt::Debug>(
    what: &str,
    r: xstream_core::Result<T>,
    ok: fn(&Error) -> bool,
) -> Result<(), String> {
    match r {
        Err(e) if ok(&e) => Ok(()),
        other => Err(format!("{what}: expected a refusal, got {other:?}")),
    }
}

/// `into_raw` then `from_raw` keeps the bytes and the descriptor says what the buffer was
/// (requested length, not the granule); the taken-back buffer works in every stream
/// operation (memset, write, read, copy, views, a kernel argument); a borrowed alias sees and
/// makes the same bytes and its drop never frees; the owner's drop frees; bad descriptors
/// (another backend, another device, a zero address, a stream-ordered kind where the backend
/// has none) are refused.
pub(crate) fn raw_round_trip<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let ordinal = dev.info().ordinal;
    let s = dev.create_stream(&nb()).ctx("create")?;
    // Not a multiple of the allocation granule: the descriptor carries the requested length.
    let len = 1000;
    let buf = dev.alloc(len).ctx("alloc")?;
    let addr = buf.device_address();
    let bytes = pattern(len);
    s.write(&buf, 0, bytes.clone()).ctx("write")?;
    s.synchronize().ctx("synchronize")?;
    let raw = buf.into_raw();
    let expect = RawBuffer::new(B::KIND, ordinal, addr, len);
    ensure!(raw == expect, "into_raw gave {raw:?}, expected {expect:?}");
    ensure!(
        live(env, raw)? != Some(false),
        "into_raw freed the memory ({raw:?} is no longer live)"
    );

    // SAFETY: `raw` came from `into_raw` of a synchronized buffer and nobody else owns it.
    let owned = unsafe { B::Buffer::from_raw(dev, raw) }.ctx("from_raw")?;
    ensure!(
        owned.len() == len && owned.device_address() == addr,
        "from_raw gave {} bytes at {:#x}",
        owned.len(),
        owned.device_address()
    );
    let mut model = bytes.clone();
    ensure!(
        read_all::<B>(&s, &owned)? == model,
        "the bytes changed across into_raw / from_raw"
    );

    // Every stream operation on the taken-back buffer.
    s.memset_view(BufferView::range(&owned, 8, 16).ctx("view")?, 0xAB)
        .ctx("memset_view")?;
    model[8..24].fill(0xAB);
    s.write(&owned, 100, vec![0x11; 20]).ctx("write")?;
    model[100..120].fill(0x11);
    s.copy(&owned, 100, &owned, 200, 20).ctx("copy within")?;
    model[200..220].fill(0x11);
    let other = dev.alloc(64).ctx("alloc other")?;
    s.copy(&owned, 0, &other, 0, 64).ctx("copy out")?;
    s.copy(&other, 0, &owned, 500, 64).ctx("copy in")?;
    let head = model[..64].to_vec();
    model[500..564].copy_from_slice(&head);
    let mut kernel = "no builtin kernel on this device";
    if dev.info().capabilities.contains(Capabilities::KERNELS) {
        let f = dev
            .builtin_module()
            .and_then(|m| m.function(BUILTIN_LCG))
            .ctx("builtin lcg")?;
        let v = BufferView::range(&owned, 256, 64).ctx("view")?;
        let (n, cfg) = lcg_launch(64).ctx("lcg_launch")?;
        s.launch_kernel(
            &f,
            &cfg,
            &[KernelArg::View(v), KernelArg::U32(n), KernelArg::U32(2)],
        )
        .ctx("launch on a view of the taken-back buffer")?;
        lcg_reference(&mut model[256..320], 2);
        kernel = "a kernel on a view of it";
    }
    ensure!(
        read_all::<B>(&s, &owned)? == model,
        "memset, write, copies or the kernel on the taken-back buffer gave other bytes"
    );

    // A borrowed alias of the owned memory: same bytes both ways; its drop never frees.
    let part = RawBuffer::new(B::KIND, ordinal, addr, len);
    // SAFETY: `owned` keeps the memory live until after `borrowed` and its work are gone
    // (synchronized below before the drop).
    let borrowed = unsafe { B::Buffer::from_raw_borrowed(dev, part) }.ctx("from_raw_borrowed")?;
    ensure!(
        read_all::<B>(&s, &borrowed)? == model,
        "the borrowed buffer reads other bytes than its owner"
    );
    s.memset(&borrowed, 900, 100, 0x5A).ctx("memset borrowed")?;
    model[900..1000].fill(0x5A);
    ensure!(
        read_all::<B>(&s, &owned)? == model,
        "a write through the borrowed buffer is not seen by the owner"
    );
    // A buffer dropped after `borrowed`: once it is observed freed, every free queued before
    // (frees can run on a reaper thread, in order) has run.
    let marker = dev.alloc(64).ctx("alloc marker")?;
    let marker_raw = RawBuffer::new(B::KIND, ordinal, marker.device_address(), 64);
    drop(borrowed);
    drop(marker);
    s.synchronize().ctx("synchronize")?;
    let marker_freed = freed(env, marker_raw)?;
    ensure!(
        marker_freed != Some(false),
        "a dropped plain buffer was not freed"
    );
    ensure!(
        live(env, raw)? != Some(false),
        "dropping the borrowed buffer freed its owner's memory"
    );
    ensure!(
        read_all::<B>(&s, &owned)? == model,
        "the owner's bytes changed after the borrowed buffer was dropped"
    );

    // The owner's drop frees.
    drop(owned);
    s.synchronize().ctx("synchronize")?;
    dev.synchronize().ctx("device synchronize")?;
    let owner_freed = freed(env, raw)?;
    ensure!(
        owner_freed != Some(false),
        "the buffer from from_raw did not free its memory at drop"
    );

    // A stream-ordered buffer: the kind says which free applies; it round-trips too.
    let ord = s.alloc_async(256).ctx("alloc_async")?;
    s.write(&ord, 0, pattern(256)).ctx("write")?;
    s.synchronize().ctx("synchronize")?;
    let oraw = ord.into_raw();
    let is_ordered = oraw.alloc == RawAlloc::StreamOrdered;
    ensure!(
        oraw.len == 256 && (B::KIND == BackendKind::Cuda || !is_ordered),
        "into_raw of a stream-ordered buffer gave {oraw:?}"
    );
    // SAFETY: from `into_raw` of a synchronized buffer; nobody else owns it.
    let back = unsafe { B::Buffer::from_raw(dev, oraw) }.ctx("from_raw of alloc_async")?;
    ensure!(
        read_all::<B>(&s, &back)? == pattern(256),
        "a stream-ordered buffer's bytes changed across into_raw / from_raw"
    );
    drop(back);
    s.synchronize().ctx("synchronize")?;

    // Bad descriptors, each refused with its own error.
    let other_kind = if B::KIND == BackendKind::Host {
        BackendKind::Cuda
    } else {
        BackendKind::Host
    };
    let probe = dev.alloc(64).ctx("alloc probe")?;
    let good = RawBuffer::new(B::KIND, ordinal, probe.device_address(), 64);
    let bad = [
        (
            "another backend",
            RawBuffer {
                backend: other_kind,
                ..good
            },
            (|e: &Error| matches!(e, Error::WrongBackend { .. })) as fn(&Error) -> bool,
        ),
        (
            "another device",
            RawBuffer {
                ordinal: ordinal + 1,
                ..good
            },
            |e: &Error| matches!(e, Error::WrongDevice(_)),
        ),
        (
            "a zero address with a length",
            RawBuffer { address: 0, ..good },
            |e: &Error| matches!(e, Error::InvalidArgument(_)),
        ),
    ];
    for (what, r, ok) in bad {
        // SAFETY: each descriptor is refused by the checks every backend makes before
        // touching memory (the error is asserted); `probe` stays owned by xstream.
        let (a, b) = unsafe {
            (
                B::Buffer::from_raw(dev, r),
                B::Buffer::from_raw_borrowed(dev, r),
            )
        };
        refused(&format!("from_raw of {what}"), a, ok)?;
        refused(&format!("from_raw_borrowed of {what}"), b, ok)?;
    }
    // SAFETY: refused by the descriptor checks (asserted): a zero address owns nothing.
    let null_owned = unsafe { B::Buffer::from_raw(dev, RawBuffer::new(B::KIND, ordinal, 0, 0)) };
    refused("from_raw of a zero address", null_owned, |e| {
        matches!(e, Error::InvalidArgument(_))
    })?;
    if B::KIND != BackendKind::Cuda {
        // SAFETY: refused (asserted): this backend has no stream-ordered allocation.
        let r = unsafe { B::Buffer::from_raw(dev, good.with_alloc(RawAlloc::StreamOrdered)) };
        refused("from_raw of a stream-ordered kind", r, |e| {
            matches!(e, Error::InvalidArgument(_))
        })?;
    }
    drop(probe);

    let observed = match (marker_freed, owner_freed) {
        (Some(_), Some(_)) => "frees observed",
        _ => "frees not observable here",
    };
    pass(format!(
        "round trip kept the bytes through memset, write, copies, views and {kernel}; \
         borrowed alias shares bytes and never frees; {observed}; bad descriptors refused"
    ))
}
