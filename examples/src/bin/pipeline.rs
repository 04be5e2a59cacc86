//! A multi-stream copy / compute pipeline: the shape of most accelerator runtimes' data path.
//!
//! The input is cut into chunks. One *upload* stream copies each chunk from a page-locked host
//! buffer to its device buffer (one native asynchronous copy) and records an event; one of
//! several *compute* streams waits on that event (a device-side dependency: the host never
//! blocks), runs the compute kernel on the chunk, and copies the result back into a
//! page-locked output buffer. Timing events around the whole run give the device time. Every
//! output is checked against a host reference.
//!
//! ```sh
//! cargo run -p xstream-examples --bin pipeline                      # auto: GPU, NPU or host
//! cargo run -p xstream-examples --bin pipeline -- --backend host
//! ```
//!
//! The compute kernel is the built-in LCG ([`Kernel::Lcg`]). On a device without the built-in
//! kernels but with the built-in reduce (an Ascend NPU: its runtime has `aclrtReduceAsync` and
//! cannot load the simulator-format builtin module) the compute stage is [`ROUNDS`] reduces
//! instead ([`Stream::reduce`], f32 sums of an addend of 0.5 into the chunk, whose words are then
//! small integers as `f32`); without either it is skipped. The program says which ran. To put
//! your own kernel here, see the `user_kernel` example.

use std::process::ExitCode;

use xstream::{
    lcg_reference, Backend, Capabilities, Device, Event, EventDesc, Kernel, PinnedAllocDesc,
    PinnedBuffer, ReduceKind, ReduceType, Reduction, Result, Stream, StreamDesc, StreamFlags,
};

/// Compute streams (the upload stream comes on top).
const STREAMS: usize = 3;
/// Chunks of input.
const CHUNKS: usize = 12;
/// Bytes per chunk (a multiple of 4: the kernel works on `u32` words).
const CHUNK_BYTES: usize = 64 * 1024;
/// LCG rounds per word (how much compute per byte).
const ROUNDS: u32 = 8;

/// The input byte `i` of chunk `c` (any deterministic pattern will do).
fn input_byte(c: usize, i: usize) -> u8 {
    (i.wrapping_mul(31) ^ c.wrapping_mul(7)) as u8
}

/// The input of chunk `c` for the reduce stage: word `k` is `input_byte(c, k)` as `f32`.
fn input_words(c: usize) -> Vec<u8> {
    (0..CHUNK_BYTES / 4)
        .flat_map(|k| f32::from(input_byte(c, k)).to_le_bytes())
        .collect()
}

/// The whole program, for any backend `B`.
fn run<B: Backend>() -> Result<()> {
    let dev = B::open(0)?;
    let info = dev.info();
    println!(
        "backend {}, device {} ({})",
        B::KIND,
        info.name,
        info.driver
    );
    let compute = info.capabilities.contains(Capabilities::KERNELS);
    // Without the built-in kernels, the built-in reduce (no kernel binary needed).
    let reduce = !compute && info.capabilities.contains(Capabilities::REDUCE);

    // Streams. NON_BLOCKING: no implicit synchronization with the device's default stream,
    // which is what a runtime wants for its own queues.
    let new_stream = |name: String| {
        dev.create_stream(
            &StreamDesc::new()
                .flags(StreamFlags::NON_BLOCKING)
                .name(name),
        )
    };
    let upload = new_stream("upload".into())?;
    let workers = (0..STREAMS)
        .map(|i| new_stream(format!("compute-{i}")))
        .collect::<Result<Vec<_>>>()?;

    // Page-locked host buffers: the device copies from and to them directly (no staging
    // copy), which is what makes the copies truly asynchronous. Filled before the timed run.
    let mut inputs: Vec<PinnedBuffer<B>> = Vec::with_capacity(CHUNKS);
    let mut outputs: Vec<PinnedBuffer<B>> = Vec::with_capacity(CHUNKS);
    for c in 0..CHUNKS {
        let mut h = dev.alloc_pinned(CHUNK_BYTES, &PinnedAllocDesc::new())?;
        if reduce {
            h.as_mut_slice()?.copy_from_slice(&input_words(c));
        } else {
            for (i, b) in h.as_mut_slice()?.iter_mut().enumerate() {
                *b = input_byte(c, i);
            }
        }
        inputs.push(h);
        outputs.push(dev.alloc_pinned(CHUNK_BYTES, &PinnedAllocDesc::new())?);
    }
    // One device buffer per chunk keeps the example simple; a real pipeline reuses a few
    // slots per stream once the work that used them completed (see `xstream::pipeline`).
    let slots = (0..CHUNKS)
        .map(|_| dev.alloc(CHUNK_BYTES))
        .collect::<Result<Vec<_>>>()?;
    // The reduce stage's addend: 0.5 in every f32 word, written once before the run.
    let addend = dev.alloc(CHUNK_BYTES)?;
    if reduce {
        upload.write(&addend, 0, 0.5f32.to_le_bytes().repeat(CHUNK_BYTES / 4))?;
        upload.synchronize()?;
    }
    let sum = Reduction::new(ReduceKind::Sum, ReduceType::F32);

    // Events: one per chunk for the upload -> compute dependency, one per compute stream to
    // join them at the end, and two timing events around the run (`EventDesc::new()` makes
    // timing-enabled events).
    let new_event = || dev.create_event(&EventDesc::new());
    let uploaded = (0..CHUNKS)
        .map(|_| new_event())
        .collect::<Result<Vec<_>>>()?;
    let tails = (0..STREAMS)
        .map(|_| new_event())
        .collect::<Result<Vec<_>>>()?;
    let (start, end) = (new_event()?, new_event()?);

    // ---- Enqueue the whole run; nothing below blocks the host until `end.synchronize()`.
    start.record(&upload)?;
    for c in 0..CHUNKS {
        let s = &workers[c % STREAMS];
        upload.copy_to_device(&inputs[c], 0, &slots[c], 0, CHUNK_BYTES)?;
        uploaded[c].record(&upload)?;
        s.wait_event(&uploaded[c])?; // compute on chunk c starts after its upload
        if compute {
            s.launch_builtin(Kernel::Lcg {
                buf: &slots[c],
                rounds: ROUNDS,
            })?;
        } else if reduce {
            for _ in 0..ROUNDS {
                s.reduce(&slots[c], 0, &addend, 0, CHUNK_BYTES, sum)?;
            }
        }
        s.copy_to_host(&slots[c], 0, &mut outputs[c], 0, CHUNK_BYTES)?;
    }
    // Join: the upload stream waits for every compute stream, then records the end.
    for (t, s) in tails.iter().zip(&workers) {
        t.record(s)?;
        upload.wait_event(t)?;
    }
    end.record(&upload)?;
    end.synchronize()?;
    let ms = start.elapsed_ms(&end)?;

    // ---- Check every chunk against the host reference. `as_slice` would also wait for the
    // copy into that buffer, so reading outputs early is safe, just not overlapped.
    let rounds = if compute { ROUNDS } else { 0 };
    let mut want = vec![0u8; CHUNK_BYTES];
    for (c, out) in outputs.iter().enumerate() {
        if reduce {
            // Each word gained 0.5 per round (exact in f32).
            want = (0..CHUNK_BYTES / 4)
                .flat_map(|k| (f32::from(input_byte(c, k)) + 0.5 * ROUNDS as f32).to_le_bytes())
                .collect();
        } else {
            for (i, w) in want.iter_mut().enumerate() {
                *w = input_byte(c, i);
            }
            lcg_reference(&mut want, rounds);
        }
        if out.as_slice()? != want.as_slice() {
            return Err(xstream::Error::invalid(format!(
                "chunk {c}: the device result differs from the host reference"
            )));
        }
    }
    if reduce {
        println!("compute stage: built-in reduce ({ROUNDS} f32 sums per chunk, no kernel binary)");
    } else if !compute {
        println!(
            "compute stage: NOT RUN (the {} device has no built-in kernels); copies only",
            B::KIND
        );
    }
    println!(
        "pipeline: {CHUNKS} chunks of {} KiB over {STREAMS} compute streams + 1 upload stream, \
         {:.3} ms device time",
        CHUNK_BYTES / 1024,
        ms
    );
    println!("verified: {CHUNKS} of {CHUNKS} chunks match the host reference");
    Ok(())
}

fn main() -> ExitCode {
    xstream_examples::init_tracing();
    // The backend is chosen at run time (`--backend`, `XSTREAM_BACKEND`, or auto), and
    // `dispatch!` instantiates `run` for it: generic code, no dynamic dispatch inside.
    let r = xstream_examples::choose_backend(Capabilities::KERNELS)
        .and_then(|kind| xstream::dispatch!(kind, B => run::<B>()));
    xstream_examples::exit_code(r)
}
