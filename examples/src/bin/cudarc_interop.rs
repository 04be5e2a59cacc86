//! cudarc interop (CUDA only): xstream and cudarc share streams, device memory and events,
//! both ways, with no copy and explicit ownership.
//!
//! 1. **xstream → cudarc.** [`CudaStream::cudarc_stream`] gives cudarc's view of an xstream
//!    stream. xstream keeps owning the stream; work submitted through either API runs in one
//!    order. The program writes and transforms a buffer with xstream, then reads it back with
//!    a vendor-library-style call (a raw device pointer and the raw stream, here cudarc's
//!    `cuMemcpyDtoHAsync` wrapper), ordered after the xstream work by the stream alone.
//! 2. **cudarc → xstream.** cudarc uploads data and records an event behind it; xstream
//!    adopts the slice ([`CudaBuffer::from_cudarc`]) and the event
//!    ([`CudaEvent::from_cudarc`]) without copying, and borrows cudarc's stream
//!    ([`CudaStream::from_cudarc`], [`Ownership::Borrowed`]). An xstream stream waits on the
//!    adopted event and runs a kernel on the adopted memory; an xstream host callback runs
//!    behind cudarc's work on the borrowed stream.
//!
//! Who destroys what: a stream is destroyed by the library that created it, never by the
//! other (an xstream stream whose cudarc view is still shared when it drops is leaked with a
//! warning rather than left dangling). Adopted slices and events belong to xstream: cudarc's
//! own drop releases them once xstream's last user, queued work included, is gone.
//!
//! On any other backend, or without a CUDA GPU, the program prints what it would do and a
//! `SKIP` line saying that it needs a CUDA GPU, and exits 0.
//!
//! ```sh
//! cargo run -p xstream-examples --bin cudarc_interop
//! ```

use std::process::ExitCode;
use std::sync::mpsc;

use xstream::cuda::{CudaBuffer, CudaDevice, CudaEvent, CudaStream};
use xstream::{
    lcg_reference, Backend, BackendKind, Buffer, Capabilities, CudaBackend, Device, Error,
    EventFlags, Kernel, Ownership, Result, Stream, StreamDesc, StreamFlags,
};

/// `u32` words moved through both APIs.
const WORDS: usize = 4096;
/// LCG rounds of the xstream kernel.
const ROUNDS: u32 = 3;

/// What the program does on a CUDA GPU, printed where it cannot run.
const PLAN: &str = "\
on a CUDA GPU this example would:
  1. hand an xstream stream to cudarc (CudaStream::cudarc_stream: same CUstream, no copy,
     xstream keeps ownership), run xstream work on it, and read the result back with a raw
     vendor-library call on the same stream;
  2. adopt cudarc's memory and event into xstream (CudaBuffer/CudaEvent::from_cudarc: no
     copy, xstream owns them) and borrow its stream (CudaStream::from_cudarc: never destroyed
     by xstream), then run an xstream kernel on that memory after cudarc's event.";

/// The one vendor-library-style call of the example: raw pointer and raw stream in.
mod vendor {
    use xstream::{Error, Result};

    /// Enqueues a copy of `dst.len()` words from device address `src` to `dst` on `stream`
    /// (`cuMemcpyDtoHAsync` through cudarc), then waits for the stream: the shape of any C
    /// library call that takes device pointers and a stream.
    pub fn copy_to_host(
        dst: &mut [u32],
        src: u64,
        stream: &cudarc::driver::CudaStream,
    ) -> Result<()> {
        // SAFETY: the caller passes the address of a live device buffer of this stream's
        // context holding at least `dst.len()` words; `dst` is a live, exclusively borrowed
        // host slice that stays borrowed until the `synchronize` below has returned, so the
        // copy never writes to freed or shared memory.
        let r = unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, stream.cu_stream()) };
        r.and_then(|()| stream.synchronize())
            .map_err(|e| Error::invalid(format!("the vendor call failed: {e:?}")))
    }
}

/// Converts cudarc's errors for `?`.
fn cudarc_err(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| Error::invalid(format!("cudarc {what}: {e:?}"))
}

/// Direction 1: an xstream stream used through cudarc.
fn xstream_to_cudarc(dev: &CudaDevice) -> Result<()> {
    let s = dev.create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))?;
    let theirs = s.cudarc_stream(); // cudarc's view: no copy, xstream still owns the stream
    if theirs.cu_stream() != s.as_raw().as_ptr() {
        return Err(Error::invalid("cudarc's view is not the same CUstream"));
    }
    let input: Vec<u8> = (0..WORDS as u32).flat_map(|i| i.to_le_bytes()).collect();
    let buf = dev.alloc(input.len())?;
    s.write(&buf, 0, input.clone())?; // xstream work ...
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: ROUNDS,
    })?;
    let mut out = vec![0u32; WORDS]; // ... then the vendor call, ordered by the stream alone
    vendor::copy_to_host(&mut out, buf.device_address(), theirs)?;
    let mut want = input;
    lcg_reference(&mut want, ROUNDS);
    let got: Vec<u8> = out.iter().flat_map(|w| w.to_le_bytes()).collect();
    if got != want {
        return Err(Error::invalid(
            "the vendor call read something else than the xstream kernel wrote",
        ));
    }
    println!(
        "verified: xstream -> cudarc: a vendor call on xstream's stream read the kernel's result"
    );
    Ok(())
}

/// Direction 2: cudarc's stream, memory and event used by xstream.
fn cudarc_to_xstream(dev: &CudaDevice) -> Result<()> {
    let theirs = dev
        .cudarc_context()
        .new_stream()
        .map_err(cudarc_err("new_stream"))?;
    let data: Vec<u32> = (0..WORDS as u32).map(|i| i * 5).collect();
    // cudarc work: an upload, and a cudarc event recorded behind it.
    let slice = theirs.clone_htod(&data).map_err(cudarc_err("clone_htod"))?;
    let uploaded = theirs
        .record_event(None)
        .map_err(cudarc_err("record_event"))?;

    // Adopt the slice and the event (no copy; xstream owns them from now on and cudarc's own
    // drop releases them once xstream's last user, queued work included, is gone), and
    // borrow the stream (cudarc keeps owning it; xstream never destroys it).
    let buf = CudaBuffer::from_cudarc(dev, slice)?;
    let uploaded = CudaEvent::from_cudarc(dev, uploaded, EventFlags::DISABLE_TIMING)?;
    let adopted = CudaStream::from_cudarc(dev, theirs.clone())?;
    if adopted.ownership() != Ownership::Borrowed {
        return Err(Error::invalid("an adopted stream must be borrowed"));
    }

    // xstream work on an xstream-owned stream, ordered after cudarc's upload by the event.
    let mine = dev.create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))?;
    mine.wait_event(&uploaded)?;
    mine.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: ROUNDS,
    })?;
    let back = mine.read(&buf, 0, buf.len())?;
    // And an xstream host callback behind cudarc's work on the borrowed stream.
    let (tx, rx) = mpsc::channel();
    adopted.host_callback(move |r| {
        let _ = tx.send(r);
    })?;
    mine.synchronize()?;
    adopted.synchronize()?;
    rx.recv()
        .map_err(|_| Error::invalid("the host callback never ran"))??;
    drop(adopted); // xstream lets go; the stream is cudarc's and still works
    theirs.synchronize().map_err(cudarc_err("synchronize"))?;

    let mut want: Vec<u8> = data.iter().flat_map(|w| w.to_le_bytes()).collect();
    lcg_reference(&mut want, ROUNDS);
    if back.take()? != want {
        return Err(Error::invalid(
            "the xstream kernel did not see cudarc's upload in its memory",
        ));
    }
    println!(
        "verified: cudarc -> xstream: an xstream kernel computed on cudarc's memory after \
         cudarc's event; a callback ran on cudarc's stream"
    );
    Ok(())
}

/// The program on a CUDA device.
fn run() -> Result<()> {
    let dev = CudaBackend::open(0)?;
    println!("backend cuda, device {}", dev.info().name);
    if !dev.info().capabilities.contains(Capabilities::KERNELS) {
        return Err(Error::unsupported(
            BackendKind::Cuda,
            "the built-in kernels on this GPU",
        ));
    }
    xstream_to_cudarc(&dev)?;
    cudarc_to_xstream(&dev)
}

fn main() -> ExitCode {
    xstream_examples::init_tracing();
    // Any backend may be requested; only CUDA runs the example.
    let requested = match xstream_examples::requested_backend(Capabilities::empty()) {
        Ok(kind) => kind,
        Err(e) => return xstream_examples::exit_code(Err(e)),
    };
    let why_not = match (xstream::availability(BackendKind::Cuda), requested) {
        (Err(e), _) => Some(e.to_string()),
        (Ok(()), BackendKind::Cuda) => None,
        (Ok(()), other) => Some(format!("the {other} backend was chosen")),
    };
    match why_not {
        None => xstream_examples::exit_code(run()),
        Some(why) => {
            println!("{PLAN}");
            println!("SKIP: cudarc_interop needs a CUDA GPU: {why}");
            ExitCode::SUCCESS
        }
    }
}
