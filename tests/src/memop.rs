//! Conformance check of the stream memory operations (`xstream_core::memop`).

use std::time::Duration;

use xstream_core::{
    Backend, Capabilities, Device, Error, Stream, StreamDesc, StreamFlags, WaitCondition,
};

use crate::{pass, CheckResult, Ctx, Env};

/// A wait of one width: stream, buffer, offset, value, condition.
type WaitFn<B> = fn(
    &<B as Backend>::Stream,
    &<B as Backend>::Buffer,
    usize,
    u64,
    WaitCondition,
) -> xstream_core::Result<()>;
/// A write of one width: stream, buffer, offset, value.
type WriteFn<B> =
    fn(&<B as Backend>::Stream, &<B as Backend>::Buffer, usize, u64) -> xstream_core::Result<()>;

/// One width's operations, so the same check runs for 32 and 64 bits.
struct Width<B: Backend> {
    bytes: usize,
    cap: Capabilities,
    wait: WaitFn<B>,
    write: WriteFn<B>,
}

fn widths<B: Backend>() -> [Width<B>; 2] {
    [
        Width {
            bytes: 4,
            cap: Capabilities::VALUE_OPS_32,
            wait: |s, b, o, v, c| s.wait_value32(b, o, v as u32, c),
            write: |s, b, o, v| s.write_value32(b, o, v as u32),
        },
        Width {
            bytes: 8,
            cap: Capabilities::VALUE_OPS_64,
            wait: |s, b, o, v, c| s.wait_value64(b, o, v, c),
            write: |s, b, o, v| s.write_value64(b, o, v),
        },
    ]
}

/// Prints the step the check is at when `XSTREAM_CHECK_TRACE` is set: a wait that never
/// releases shows where it stopped.
fn step(what: &str) {
    if std::env::var_os("XSTREAM_CHECK_TRACE").is_some() {
        eprintln!("value_wait_write: {what}");
    }
}

fn word(bytes: &[u8], at: usize, width: usize) -> u64 {
    let mut b = [0u8; 8];
    b[..width].copy_from_slice(&bytes[at..at + width]);
    u64::from_le_bytes(b)
}

fn read_word<B: Backend>(
    s: &B::Stream,
    buf: &B::Buffer,
    at: usize,
    w: usize,
) -> Result<u64, String> {
    let rb = s.read(buf, at, w).ctx("read")?;
    s.synchronize().ctx("synchronize after read")?;
    Ok(word(&rb.take().ctx("readback")?, 0, w))
}

/// A wait blocks only its stream until another stream's write releases it; later work of the
/// waiting stream sees the release; GEQ works across a counter wrap; bad words are refused; a
/// width the device lacks is refused with `Unsupported`.
pub(crate) fn value_wait_write<B: Backend>(env: &Env<B>) -> CheckResult {
    let nb = StreamDesc::new().flags(StreamFlags::NON_BLOCKING);
    let mut done = Vec::new();
    // Every buffer lives until the end of the check: freeing device memory synchronizes the
    // device on CUDA (`cuMemFree`), and a free made while a stream is blocked on a value wait
    // stalls the driver until the wait is released (seen on an H200: the next host-blocking
    // call of another stream never returned). xstream frees dropped buffers on its reaper.
    let bufs = [
        env.device.alloc(64).ctx("alloc")?,
        env.device.alloc(64).ctx("alloc")?,
    ];
    for (w, buf) in widths::<B>().into_iter().zip(&bufs) {
        let n = w.bytes;
        let waiter = env.device.create_stream(&nb).ctx("create waiter")?;
        if !env.device.info().capabilities.contains(w.cap) {
            match (w.wait)(&waiter, buf, 0, 1, WaitCondition::Eq) {
                Err(Error::Unsupported { .. }) => {}
                other => return Err(format!("{n}-byte wait without {:?}: {other:?}", w.cap)),
            }
            match (w.write)(&waiter, buf, 0, 1) {
                Err(Error::Unsupported { .. }) => {}
                other => return Err(format!("{n}-byte write without {:?}: {other:?}", w.cap)),
            }
            done.push(format!("{}-bit unsupported (refused)", n * 8));
            continue;
        }
        let releaser = env.device.create_stream(&nb).ctx("create releaser")?;
        let reader = env.device.create_stream(&nb).ctx("create reader")?;
        step(&format!("{n}-byte: memset"));
        waiter.memset(buf, 0, 64, 0).ctx("memset")?;
        waiter.synchronize().ctx("sync memset")?;

        // Phase 1: EQ released by another stream's write.
        step("wait EQ 7");
        (w.wait)(&waiter, buf, 0, 7, WaitCondition::Eq).ctx("wait EQ 7")?;
        (w.write)(&waiter, buf, 16, 42).ctx("write after the wait")?;
        step("timed synchronize of the blocked waiter");
        match waiter.synchronize_timeout(Duration::from_millis(50)) {
            Err(Error::Timeout(_)) => {}
            other => {
                return Err(format!(
                    "{n}-byte: waiter not blocked before release: {other:?}"
                ))
            }
        }
        step("read on the reader stream while the waiter is blocked");
        let before = read_word::<B>(&reader, buf, 16, n)?;
        if before != 0 {
            return Err(format!(
                "{n}-byte: work after the wait ran before the release ({before})"
            ));
        }
        step("release by the releaser stream");
        (w.write)(&releaser, buf, 0, 7).ctx("release")?;
        step("synchronize the released waiter");
        waiter.synchronize().ctx("waiter after release")?;
        let after = read_word::<B>(&reader, buf, 16, n)?;
        if after != 42 {
            return Err(format!(
                "{n}-byte: write after the wait gave {after}, expected 42"
            ));
        }

        // Phase 2: GEQ across a wrap, released by a host-side write of the bytes.
        let top = if n == 4 {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        };
        step("GEQ across a wrap");
        (w.write)(&waiter, buf, 8, top - 1).ctx("counter near the top")?;
        // The counter must be in place before the release below: without this, a slow stream
        // (valgrind) could run this write after the host's wrapped write and wait forever.
        waiter.synchronize().ctx("counter in place")?;
        (w.wait)(&waiter, buf, 8, top, WaitCondition::Geq).ctx("wait GEQ top")?;
        (w.write)(&waiter, buf, 24, 5).ctx("write after GEQ")?;
        match waiter.synchronize_timeout(Duration::from_millis(50)) {
            Err(Error::Timeout(_)) => {}
            other => return Err(format!("{n}-byte: GEQ passed below its value: {other:?}")),
        }
        // The counter wraps to 1, which is "after" the top in wrapping arithmetic.
        step("host write of the wrapped counter");
        releaser
            .write(buf, 8, 1u64.to_le_bytes()[..n].to_vec())
            .ctx("host write of the wrapped counter")?;
        step("synchronize the waiter after the wrap");
        waiter.synchronize().ctx("waiter after wrap")?;
        let got = read_word::<B>(&reader, buf, 24, n)?;
        if got != 5 {
            return Err(format!("{n}-byte: write after GEQ gave {got}"));
        }

        // Bad words.
        for (off, why) in [(n / 2, "misaligned"), (64, "outside the buffer")] {
            match (w.wait)(&waiter, buf, off, 0, WaitCondition::Geq) {
                Err(Error::InvalidArgument(_)) => {}
                other => return Err(format!("{n}-byte wait {why}: {other:?}")),
            }
            match (w.write)(&waiter, buf, off, 0) {
                Err(Error::InvalidArgument(_)) => {}
                other => return Err(format!("{n}-byte write {why}: {other:?}")),
            }
        }
        done.push(format!("{}-bit native", n * 8));
    }
    pass(done.join(", "))
}
