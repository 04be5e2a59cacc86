//! Awaiting many streams' completions under tokio.
//!
//! Each of [`STREAMS`] tasks owns one stream: it enqueues its work (a copy in, the compute
//! kernel, a copy out), then awaits the device without blocking an executor thread, with the
//! two completion futures xstream offers:
//!
//! - [`Event::completed`]: resolves when the work recorded before the event completed;
//! - [`Stream::completed`]: resolves when everything enqueued on the stream so far completed
//!   (one host callback).
//!
//! Both are plain [`std::future::Future`]s that do not depend on an executor: tokio here,
//! any other executor or [`xstream::block_on`] elsewhere. Sixteen streams in flight are
//! awaited by two executor threads: no thread is parked per stream.
//!
//! ```sh
//! cargo run -p xstream-examples --bin async_streams -- --backend host
//! ```

use std::process::ExitCode;

use tokio::task::JoinSet;
use xstream::{
    lcg_reference, Backend, Capabilities, Device, Error, Event, EventDesc, EventFlags, Kernel,
    Result, Stream, StreamDesc, StreamFlags,
};

/// Streams (and tasks) in flight at once.
const STREAMS: usize = 16;
/// Bytes of each stream's buffer (a multiple of 4).
const BYTES: usize = 16 * 1024;
/// Executor threads awaiting them.
const EXECUTOR_THREADS: usize = 2;

/// One task: enqueue the work of stream `i`, await it, check the result.
async fn one_stream<B: Backend>(dev: B::Device, i: usize) -> Result<()> {
    let s = dev.create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))?;
    let buf = dev.alloc(BYTES)?;
    let input: Vec<u8> = (0..BYTES).map(|k| (k ^ i) as u8).collect();
    // Each stream does a different amount of compute, so they finish in any order.
    let kernels = dev.info().capabilities.contains(Capabilities::KERNELS);
    let rounds = if kernels { 1 + (i as u32 % 4) * 8 } else { 0 };

    // Enqueue: none of these calls waits for the device.
    s.write(&buf, 0, input.clone())?;
    if kernels {
        s.launch_builtin(Kernel::Lcg { buf: &buf, rounds })?;
    }
    // An event that only marks a point in the stream needs no timing.
    let computed = dev.create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))?;
    computed.record(&s)?;
    let back = s.read(&buf, 0, BYTES)?;

    // Await: the task is suspended, its executor thread runs other tasks meanwhile.
    computed.completed()?.await?; // the write and the kernel are done
    s.completed()?.await?; // and so is the read after them

    let mut want = input;
    lcg_reference(&mut want, rounds);
    if back.take()? != want {
        return Err(Error::invalid(format!(
            "stream {i}: the device result differs from the host reference"
        )));
    }
    Ok(())
}

/// The whole program, for any backend `B`.
async fn run<B: Backend>() -> Result<()> {
    let dev = B::open(0)?;
    println!("backend {}, device {}", B::KIND, dev.info().name);
    if !dev.info().capabilities.contains(Capabilities::KERNELS) {
        println!("compute: NOT RUN (no built-in kernels on this device); copies only");
    }
    let mut tasks = JoinSet::new();
    for i in 0..STREAMS {
        tasks.spawn(one_stream::<B>(dev.clone(), i));
    }
    let mut done = 0;
    while let Some(joined) = tasks.join_next().await {
        joined.map_err(|e| Error::invalid(format!("a task did not finish: {e}")))??;
        done += 1;
    }
    println!("awaited {STREAMS} streams on {EXECUTOR_THREADS} executor threads");
    println!("verified: {done} of {STREAMS} streams match the host reference");
    Ok(())
}

fn main() -> ExitCode {
    xstream_examples::init_tracing();
    let r = xstream_examples::choose_backend(Capabilities::KERNELS).and_then(|kind| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(EXECUTOR_THREADS)
            .build()
            .map_err(|e| Error::invalid(format!("cannot start the tokio runtime: {e}")))?;
        // `dispatch!` picks the backend type; the generic future runs on tokio.
        xstream::dispatch!(kind, B => rt.block_on(run::<B>()))
    });
    xstream_examples::exit_code(r)
}
