//! Virtual memory (`xstream_core::vmm`): map, unmap and remap physical memory in a reserved
//! range, data through copies, memsets and a kernel on the mapped bytes, one physical handle
//! mapped twice, drops deferred behind queued work, and the bad-input rules.

use xstream_core::{Backend, Buffer, Capabilities, Device, Error, Kernel, Stream, VirtualMemory};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env, Gate};

fn is_invalid<T>(r: xstream_core::Result<T>) -> bool {
    matches!(r, Err(Error::InvalidArgument(_)))
}

/// Unmaps the mapping at `offset` once the buffers dropped before have let go of it: a
/// backend may release a dropped buffer's hold after the call returns (Ascend: on its reaper
/// thread, after the device's queued work), so a refusal is retried for a while (a guard
/// against hangs, not a timing bound).
fn unmap_once_released<D: VirtualMemory>(
    range: &xstream_core::VirtualRange<D>,
    offset: usize,
) -> Result<(), String> {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match range.unmap(offset) {
            Ok(()) => return Ok(()),
            Err(e) if std::time::Instant::now() > end => {
                return Err(format!("unmap 10 s after the buffers went: {e}"))
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    }
}

/// Map, unmap, remap; data through copies, a memset and a kernel; one handle mapped twice;
/// a range and a buffer dropped while queued work still uses them.
pub(crate) fn vmm_map_unmap<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::VIRTUAL_MEMORY, "virtual memory");
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let g = dev.granularity().ctx("granularity")?.minimum;
    let range = dev.reserve(4 * g).ctx("reserve")?;
    let p1 = dev.create_physical(g).ctx("create_physical")?;
    let p2 = dev.create_physical(2 * g).ctx("create_physical")?;
    range.map(0, &p1).ctx("map p1 at 0")?;
    range.map(g, &p2).ctx("map p2 at g")?;
    range.map(3 * g, &p1).ctx("map p1 again at 3g")?;
    ensure!(
        range.mappings() == vec![(0, g), (g, 2 * g), (3 * g, g)],
        "mappings {:?}",
        range.mappings()
    );
    range.set_access(0, 4 * g, dev).ctx("set_access")?;
    // A buffer over two adjacent mappings (p1 then p2), at its virtual address.
    let whole = range.buffer(0, 3 * g).ctx("buffer over two mappings")?;
    ensure!(
        whole.device_address() == range.address() && whole.len() == 3 * g,
        "buffer at {:#x} len {}, range at {:#x}",
        whole.device_address(),
        whole.len(),
        range.address()
    );
    let pattern: Vec<u8> = (0..3 * g).map(|i| (i * 7 % 253) as u8).collect();
    s.write(&whole, 0, pattern.clone()).ctx("write")?;
    // A memset across the boundary between the two mappings.
    s.memset(&whole, g - 100, 200, 0xAB)
        .ctx("memset across mappings")?;
    let mut want = pattern;
    want[g - 100..g + 100].fill(0xAB);
    let plain = dev.alloc(3 * g).ctx("alloc")?;
    s.copy(&whole, 0, &plain, 0, 3 * g)
        .ctx("copy mapped -> plain")?;
    ensure!(
        read_all::<B>(&s, &plain)? == want,
        "bytes copied out of the mapped range differ"
    );
    // The same physical memory at 3g shows p1's bytes.
    let alias = range
        .buffer(3 * g, g)
        .ctx("buffer of the second mapping of p1")?;
    ensure!(
        read_all::<B>(&s, &alias)? == want[..g],
        "the second mapping of one physical handle shows other bytes"
    );
    // A kernel on a view of the mapped bytes.
    let mut kernel = "no kernels";
    if dev.info().capabilities.contains(Capabilities::KERNELS) {
        let k = range.buffer(g, 2 * g).ctx("buffer of p2")?;
        s.launch_builtin(Kernel::Lcg { buf: &k, rounds: 3 })
            .ctx("launch on mapped memory")?;
        let mut w = want[g..3 * g].to_vec();
        crate::reference::lcg_jump(&mut w, 3);
        ensure!(
            read_all::<B>(&s, &k)? == w,
            "the kernel on mapped memory differs from the reference"
        );
        want[g..3 * g].copy_from_slice(&w);
        kernel = "a kernel";
    }
    // Unmap is refused while a buffer uses the mapping, then works; the bytes stay in the
    // physical memory and show again after a remap.
    ensure!(
        is_invalid(range.unmap(3 * g)),
        "unmap of a mapping a live buffer uses was not refused"
    );
    drop(alias);
    drop(whole);
    s.synchronize().ctx("synchronize")?;
    unmap_once_released(&range, 3 * g)?;
    range.map(3 * g, &p1).ctx("remap p1 at 3g")?;
    range
        .set_access(3 * g, g, dev)
        .ctx("set_access after remap")?;
    let again = range.buffer(3 * g, g).ctx("buffer after remap")?;
    ensure!(
        read_all::<B>(&s, &again)? == want[..g],
        "bytes lost across unmap and remap"
    );
    drop(again);
    // Release is refused with live mappings and hands the range back.
    let range = match range.release() {
        Ok(()) => return Err("release with live mappings succeeded".into()),
        Err((r, e)) => {
            ensure!(
                matches!(e, Error::InvalidArgument(_)),
                "release with mappings: {e}"
            );
            r
        }
    };
    // Drops behind queued work: the gate holds the stream; a memset into the mapped range and
    // a copy out are queued; then the buffer, the range and the handles are dropped.
    let out = dev.alloc(g).ctx("alloc")?;
    let buf = range.buffer(0, g).ctx("buffer")?;
    let gate = Gate::hold::<B>(&s)?;
    s.memset(&buf, 0, g, 0x5C).ctx("memset behind the gate")?;
    s.copy(&buf, 0, &out, 0, g).ctx("copy behind the gate")?;
    drop(buf);
    drop(range);
    drop(p1);
    drop(p2);
    gate.open();
    s.synchronize().ctx("synchronize after the drops")?;
    ensure!(gate.released(), "the gate gave up before it was opened");
    ensure!(
        read_all::<B>(&s, &out)?.iter().all(|&b| b == 0x5C),
        "work queued before the range's drop did not see its mapping"
    );
    // After the deferred release, a fresh range works (nothing left mapped).
    let r2 = dev.reserve(g).ctx("reserve after the drops")?;
    r2.release()
        .map_err(|(_, e)| format!("release of an empty range: {e}"))?;
    pass(format!(
        "granularity {g}: two mappings under one buffer, one handle mapped twice, copies, a \
         memset and {kernel} on mapped bytes; unmap refused while used, remap keeps the bytes; \
         drops behind queued work"
    ))
}

/// Bad input is a clear error on every backend; without the capability, Unsupported.
pub(crate) fn vmm_bad_input<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    if !dev
        .info()
        .capabilities
        .contains(Capabilities::VIRTUAL_MEMORY)
    {
        for (what, r) in [
            ("granularity", dev.granularity().map(|_| ())),
            ("reserve", dev.reserve(1 << 21).map(|_| ())),
            ("create_physical", dev.create_physical(1 << 21).map(|_| ())),
        ] {
            ensure!(
                matches!(r, Err(Error::Unsupported { .. })),
                "{what} without VIRTUAL_MEMORY: {r:?}"
            );
        }
        return pass("no VIRTUAL_MEMORY: granularity, reserve and create refuse with Unsupported");
    }
    let g = dev.granularity().ctx("granularity")?.minimum;
    ensure!(is_invalid(dev.reserve(0)), "reserve(0) accepted");
    ensure!(is_invalid(dev.reserve(g + 1)), "unaligned reserve accepted");
    ensure!(
        is_invalid(dev.create_physical(0)),
        "create_physical(0) accepted"
    );
    ensure!(
        is_invalid(dev.create_physical(g / 2)),
        "unaligned create_physical accepted"
    );
    let range = dev.reserve(4 * g).ctx("reserve")?;
    let p = dev.create_physical(g).ctx("create")?;
    let p2 = dev.create_physical(2 * g).ctx("create")?;
    ensure!(
        is_invalid(range.map(g / 2, &p)),
        "unaligned map offset accepted"
    );
    ensure!(
        is_invalid(range.map(4 * g, &p)),
        "map past the end accepted"
    );
    ensure!(
        is_invalid(range.map(3 * g, &p2)),
        "map running past the end accepted"
    );
    ensure!(is_invalid(range.unmap(0)), "unmap of nothing accepted");
    range.map(g, &p2).ctx("map")?;
    ensure!(is_invalid(range.map(g, &p)), "map over a mapping accepted");
    ensure!(
        is_invalid(range.map(2 * g, &p)),
        "map over the second half of a mapping accepted"
    );
    ensure!(
        is_invalid(range.map(0, &p2)),
        "map overlapping the start of a mapping accepted"
    );
    ensure!(
        is_invalid(range.unmap(2 * g)),
        "unmap in the middle of a mapping accepted"
    );
    ensure!(
        is_invalid(range.unmap(0)),
        "unmap where nothing is mapped accepted"
    );
    ensure!(
        is_invalid(range.buffer(g, g)),
        "a buffer before set_access accepted"
    );
    ensure!(
        is_invalid(range.set_access(0, 2 * g, dev)),
        "set_access over an unmapped byte accepted"
    );
    ensure!(
        is_invalid(range.set_access(g, g, dev)),
        "set_access cutting a mapping accepted"
    );
    range.set_access(g, 2 * g, dev).ctx("set_access")?;
    ensure!(
        is_invalid(range.buffer(0, 2 * g)),
        "a buffer over a hole accepted"
    );
    ensure!(
        is_invalid(range.buffer(g, 4 * g)),
        "a buffer past the range accepted"
    );
    range
        .buffer(g + 3, 100)
        .ctx("a buffer at an odd offset inside a mapping")?;
    let mut other = "one device: a handle of another device not tried";
    if B::device_count().ctx("device_count")? > 1 {
        let d1 = B::open(1).ctx("open device 1")?;
        if d1
            .info()
            .capabilities
            .contains(Capabilities::VIRTUAL_MEMORY)
        {
            let q = d1.create_physical(g).ctx("create on device 1")?;
            let r = range.map(0, &q);
            ensure!(
                matches!(r, Err(Error::WrongDevice(_))),
                "a handle of device 1 mapped on device 0: {r:?}"
            );
            other = "a handle of another device refused with WrongDevice";
        }
    }
    let range = match range.release() {
        Ok(()) => return Err("release with a live mapping succeeded".into()),
        Err((r, _)) => r,
    };
    unmap_once_released(&range, g)?;
    range
        .release()
        .map_err(|(_, e)| format!("release after unmap: {e}"))?;
    pass(format!(
        "zero/unaligned sizes and offsets, past the end, overlaps, unmap of nothing, access \
         and buffers over holes or before access, release with mappings: InvalidArgument; \
         {other}"
    ))
}
