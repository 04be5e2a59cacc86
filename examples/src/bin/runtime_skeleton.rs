//! A backend-generic runtime skeleton: the bones of an ML runtime written once over
//! `B: Backend` and instantiated for the backend chosen at run time.
//!
//! The pattern every stream-based runtime uses:
//!
//! - streams come from a per-device [`StreamPool`] (created lazily, handed out round-robin,
//!   so the hot path never creates a stream);
//! - every tensor carries a *ready event*, recorded after the work that last wrote it;
//! - an operation picks a stream, makes it wait for its inputs' ready events (device-side
//!   waits: the host never blocks), enqueues its work, and records its output's ready event;
//! - the host blocks only when it reads a result back.
//!
//! The program builds a small graph of operations: two uploads, one kernel on each (on two
//! streams, in parallel), a gather of both into one tensor on a third stream, and a download;
//! then checks the result against a host reference.
//!
//! ```sh
//! cargo run -p xstream-examples --bin runtime_skeleton -- --backend host
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use xstream::{
    lcg_reference, Backend, Buffer, Capabilities, Device, Error, Event, EventDesc, EventFlags,
    Kernel, PoolConfig, PriorityClass, Result, Stream, StreamOf, StreamPool,
};

/// A device tensor: a buffer and the event that marks its contents ready.
struct Tensor<B: Backend> {
    buf: B::Buffer,
    ready: B::Event,
}

/// The runtime: one device, its stream pool, and what the device can do.
struct Runtime<B: Backend> {
    dev: B::Device,
    pool: StreamPool<B>,
    kernels: bool,
}

impl<B: Backend> Runtime<B> {
    /// Opens device `ordinal` with a small pool (two shared streams per priority class).
    fn new(ordinal: usize) -> Result<Self> {
        let dev = B::open(ordinal)?;
        let kernels = dev.info().capabilities.contains(Capabilities::KERNELS);
        let pool = StreamPool::new(
            dev.clone(),
            PoolConfig {
                per_class: [2, 2, 2],
                ..PoolConfig::default()
            },
        )?;
        Ok(Self { dev, pool, kernels })
    }

    /// A stream for the next operation.
    fn stream(&self) -> Result<Arc<StreamOf<B>>> {
        self.pool.get(PriorityClass::Normal)
    }

    /// Ready events only order work; they need no timing.
    fn event(&self) -> Result<B::Event> {
        self.dev
            .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
    }

    /// Records `t`'s ready event on `s`, after the work just enqueued there.
    fn mark_ready(&self, buf: B::Buffer, s: &StreamOf<B>) -> Result<Tensor<B>> {
        let ready = self.event()?;
        ready.record(s)?;
        Ok(Tensor { buf, ready })
    }

    /// Host to device: a new tensor holding `data`.
    fn upload(&self, data: &[u8]) -> Result<Tensor<B>> {
        let s = self.stream()?;
        let buf = s.alloc_async(data.len())?;
        s.write(&buf, 0, data.to_vec())?;
        self.mark_ready(buf, &s)
    }

    /// An in-place kernel on `t` (the built-in LCG here; your own kernel in a real runtime:
    /// see the `user_kernel` example). Runs after `t` is ready; `t` is ready again after it.
    fn lcg(&self, t: &mut Tensor<B>, rounds: u32) -> Result<()> {
        if !self.kernels {
            return Err(Error::unsupported(
                B::KIND,
                "the built-in kernels on this device",
            ));
        }
        let s = self.stream()?;
        s.wait_event(&t.ready)?;
        s.launch_builtin(Kernel::Lcg {
            buf: &t.buf,
            rounds,
        })?;
        t.ready.record(&s)?;
        Ok(())
    }

    /// A new tensor: the inputs one after another. Waits for every input on one stream.
    fn gather(&self, inputs: &[&Tensor<B>]) -> Result<Tensor<B>> {
        let s = self.stream()?;
        let len = inputs.iter().map(|t| t.buf.len()).sum();
        let out = s.alloc_async(len)?;
        let mut at = 0;
        for t in inputs {
            s.wait_event(&t.ready)?;
            s.copy(&t.buf, 0, &out, at, t.buf.len())?;
            at += t.buf.len();
        }
        self.mark_ready(out, &s)
    }

    /// Device to host: blocks until `t` is ready and copied.
    fn download(&self, t: &Tensor<B>) -> Result<Vec<u8>> {
        let s = self.stream()?;
        s.wait_event(&t.ready)?;
        let back = s.read(&t.buf, 0, t.buf.len())?;
        s.synchronize()?;
        back.take()
    }
}

/// The program, generic over the backend: what a runtime's entry point looks like.
fn run<B: Backend>() -> Result<()> {
    let rt = Runtime::<B>::new(0)?;
    let info = rt.dev.info();
    println!(
        "backend {}, device {} ({})",
        B::KIND,
        info.name,
        info.driver
    );

    let x: Vec<u8> = (0..4096u32).flat_map(|i| i.to_le_bytes()).collect();
    let y: Vec<u8> = (0..2048u32).flat_map(|i| (i * 3).to_le_bytes()).collect();
    let mut a = rt.upload(&x)?;
    let mut b = rt.upload(&y)?;
    // The two kernels may run in parallel: they are on different pooled streams and each
    // waits only for its own input.
    let rounds = if rt.kernels {
        rt.lcg(&mut a, 5)?;
        rt.lcg(&mut b, 9)?;
        (5, 9)
    } else {
        println!("kernels: NOT RUN (no built-in kernels on this device); data movement only");
        (0, 0)
    };
    let c = rt.gather(&[&a, &b])?;
    let got = rt.download(&c)?;

    let (mut wx, mut wy) = (x, y);
    lcg_reference(&mut wx, rounds.0);
    lcg_reference(&mut wy, rounds.1);
    wx.extend_from_slice(&wy);
    if got != wx {
        return Err(Error::invalid(
            "the gathered tensor differs from the host reference",
        ));
    }
    println!(
        "graph: 2 uploads, 2 kernels, 1 gather, 1 download on {} pooled streams",
        rt.pool.created()
    );
    println!(
        "verified: the result ({} bytes) matches the host reference",
        got.len()
    );
    Ok(())
}

fn main() -> ExitCode {
    xstream_examples::init_tracing();
    // Run-time choice: `dispatch!` expands `run::<B>()` once per compiled backend and calls
    // the one `kind` names.
    let r = xstream_examples::choose_backend(Capabilities::KERNELS)
        .and_then(|kind| xstream::dispatch!(kind, B => run::<B>()));
    xstream_examples::exit_code(r)
}
