//! An expandable caching allocator over virtual memory (`xstream::vmm`), against a per-block
//! caching allocator, on a fragmenting workload.
//!
//! **Expandable** (`xstream_examples::expandable`, shared with the allocator benchmark): one
//! reserved address range per stream (a segment) that grows by mapping
//! physical chunks of the device's granularity at its end. Blocks are carved out of the mapped
//! part best-fit, split, and coalesced with their free neighbours when freed; freed memory is
//! reused without unmapping. Every block is a buffer of the segment
//! ([`VirtualRange::buffer`](xstream::VirtualRange::buffer)) that the stream writes.
//!
//! **Per-block caching** (the baseline): every request rounded up (512 bytes; 2 MiB from
//! 1 MiB on, as PyTorch's caching allocator rounds large blocks) is a device allocation of its
//! own; freed blocks are cached and reused for a request of at most their size, never split.
//!
//! **Workload**: a transformer-like sequence (deterministic): for each step, a sequence length
//! grows then shrinks; each layer allocates activations proportional to it, frees the
//! temporaries of the layer, and the activations are freed at the end of the step.
//!
//! It prints peak live bytes, each allocator's peak reserved bytes, and the time per
//! allocation call (wall clock of this run, not a benchmark). It checks that every block holds
//! what the stream wrote into it.
//!
//! **Across streams**: a segment serves one stream; a block another stream used is freed with
//! an event recorded on that stream (no host wait), and the segment's stream waits for the
//! event before it hands the memory out again.
//!
//! ```sh
//! cargo run -p xstream-examples --bin expandable -- --backend host
//! ```

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use xstream::{Backend, Buffer, BufferOf, Capabilities, Device, Error, Result, Stream, StreamDesc};
use xstream_examples::expandable::{round, Block, Expandable};

/// The baseline: one device allocation per block size, cached for reuse.
struct PerBlock<B: Backend> {
    dev: B::Device,
    /// Cached free allocations by (size, serial).
    cache: BTreeMap<(usize, u64), BufferOf<B>>,
    serial: u64,
    reserved: usize,
    peak_reserved: usize,
    calls: u32,
    time: Duration,
}

impl<B: Backend> PerBlock<B> {
    fn class(len: usize) -> usize {
        if len >= 1 << 20 {
            len.next_multiple_of(2 << 20)
        } else {
            round(len)
        }
    }

    fn alloc(&mut self, len: usize) -> Result<(usize, BufferOf<B>)> {
        let t = Instant::now();
        let size = Self::class(len);
        let hit = self.cache.range((size, 0)..).next().map(|(k, _)| *k);
        let r = match hit {
            Some(k) => (k.0, self.cache.remove(&k).expect("cached")),
            None => {
                let b = self.dev.alloc(size)?;
                self.reserved += size;
                self.peak_reserved = self.peak_reserved.max(self.reserved);
                (size, b)
            }
        };
        self.time += t.elapsed();
        self.calls += 1;
        Ok(r)
    }

    fn free(&mut self, size: usize, b: BufferOf<B>) {
        self.serial += 1;
        self.cache.insert((size, self.serial), b);
    }
}

/// The workload's requests, in order: `Alloc(id, bytes, used on the second stream)` or
/// `Free(id)`.
enum Op {
    Alloc(usize, usize, bool),
    Free(usize),
}

/// A transformer-like sequence of growing and shrinking tensors.
fn workload() -> Vec<Op> {
    let (hidden, layers) = (256usize, 6usize);
    let mut ops = Vec::new();
    let mut id = 0;
    let mut seed = 12345u64;
    let mut rnd = move |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 33) as usize % n
    };
    for step in 0..16usize {
        // The sequence grows for 8 steps, then shrinks, with noise.
        let base = if step < 8 {
            64 + step * 128
        } else {
            64 + (15 - step) * 128
        };
        let seq = base + rnd(64);
        let mut keep = Vec::new();
        for _ in 0..layers {
            let act = seq * hidden * 4;
            ops.push(Op::Alloc(id, act, false));
            keep.push(id);
            id += 1;
            // Temporaries of the layer: attention scores (also used on a second stream) and
            // an MLP intermediate.
            let (scores, mlp) = (id, id + 1);
            ops.push(Op::Alloc(scores, seq * seq * 2, true));
            ops.push(Op::Alloc(mlp, seq * hidden * 16, false));
            id += 2;
            ops.push(Op::Free(scores));
            ops.push(Op::Free(mlp));
        }
        for k in keep.into_iter().rev() {
            ops.push(Op::Free(k));
        }
    }
    ops
}

fn run<B: Backend>() -> Result<()> {
    let dev = B::open(0)?;
    println!("backend {}, device {}", B::KIND, dev.info().name);
    let s = dev.create_stream(&StreamDesc::new())?;
    let ops = workload();

    // Expandable segment: write a tag into each block, check it before its free. Blocks of
    // the second stream `t`: `t` waits for the allocation's memset, writes its own tag and
    // reads it back; the block is freed at once (no host wait) with an event on `t`, and the
    // readback is checked at the end: a reuse not ordered after `t`'s read would show in it.
    let t = dev.create_stream(&StreamDesc::new())?;
    let mut exp = Expandable::<B>::new(&dev)?;
    let mut live: BTreeMap<usize, (Block<B>, usize, bool)> = BTreeMap::new();
    let mut later = Vec::new();
    let (mut live_bytes, mut peak_live) = (0usize, 0usize);
    let mut checked = 0usize;
    let (mut exp_calls, mut exp_time) = (0u32, Duration::ZERO);
    for op in &ops {
        match *op {
            Op::Alloc(id, len, other) => {
                let t0 = Instant::now();
                let b = exp.alloc(len, &s)?;
                exp_time += t0.elapsed();
                exp_calls += 1;
                s.memset(&b.buf, 0, b.buf.len(), (id % 251) as u8)?;
                if other {
                    t.wait_event(&s.record_event()?)?;
                    t.memset(&b.buf, 0, b.buf.len(), (id % 251) as u8 ^ 0x5a)?;
                }
                live_bytes += len;
                peak_live = peak_live.max(live_bytes);
                live.insert(id, (b, len, other));
            }
            Op::Free(id) => {
                let (b, len, other) = live.remove(&id).expect("freed once");
                live_bytes -= len;
                if other {
                    later.push((id, t.read(&b.buf, len - 1, 1)?));
                    exp.free(b, Some(&t))?;
                    continue;
                }
                let back = s.read(&b.buf, len - 1, 1)?;
                s.synchronize()?;
                if back.take()? != [(id % 251) as u8] {
                    return Err(Error::invalid(format!("block {id} lost its bytes")));
                }
                checked += 1;
                exp.free(b, None)?;
            }
        }
    }
    t.synchronize()?;
    for (id, back) in later {
        if back.take()? != [(id % 251) as u8 ^ 0x5a] {
            return Err(Error::invalid(format!(
                "block {id}: the second stream's bytes were overwritten before its read (a \
                 reuse not ordered after it)"
            )));
        }
        checked += 1;
    }
    s.synchronize()?;

    // The per-block caching baseline on the same requests.
    let mut pb = PerBlock::<B> {
        dev: dev.clone(),
        cache: BTreeMap::new(),
        serial: 0,
        reserved: 0,
        peak_reserved: 0,
        calls: 0,
        time: Duration::ZERO,
    };
    let mut held: BTreeMap<usize, (usize, BufferOf<B>)> = BTreeMap::new();
    for op in &ops {
        match *op {
            Op::Alloc(id, len, _) => {
                held.insert(id, pb.alloc(len)?);
            }
            Op::Free(id) => {
                let (size, b) = held.remove(&id).expect("freed once");
                pb.free(size, b);
            }
        }
    }

    let g = exp.gran;
    let live_rounded = peak_live.next_multiple_of(g);
    let mib = |n: usize| n as f64 / (1 << 20) as f64;
    let per_call = |t: Duration, n: u32| t.as_secs_f64() * 1e6 / f64::from(n.max(1));
    println!(
        "workload: {} allocations, {} frees; granularity {} MiB; {} reuses waited for the second stream",
        exp_calls,
        checked,
        mib(g),
        exp.waits
    );
    println!(
        "peak live: {:.1} MiB ({:.1} MiB rounded up to the granularity)",
        mib(peak_live),
        mib(live_rounded)
    );
    println!(
        "expandable segment: peak reserved {:.1} MiB = {:.3} x rounded live; {} chunks mapped, 0 unmapped; {:.2} us per allocation",
        mib(exp.peak_mapped),
        exp.peak_mapped as f64 / live_rounded as f64,
        exp.maps,
        per_call(exp_time, exp_calls)
    );
    println!(
        "per-block caching: peak reserved {:.1} MiB = {:.3} x rounded live; {:.2} us per allocation",
        mib(pb.peak_reserved),
        pb.peak_reserved as f64 / live_rounded as f64,
        per_call(pb.time, pb.calls)
    );
    println!(
        "target (expandable peak reserved <= 1.1 x rounded live): {}",
        if exp.peak_mapped as f64 <= 1.1 * live_rounded as f64 {
            "met"
        } else {
            "missed"
        }
    );
    if exp.peak_mapped < peak_live {
        return Err(Error::invalid("the segment held less than the live bytes"));
    }
    drop(live);
    drop(exp);
    println!("verified: {checked} of {checked} blocks held the bytes written into them");
    Ok(())
}

fn main() -> ExitCode {
    xstream_examples::init_tracing();
    let r = xstream_examples::choose_backend(Capabilities::VIRTUAL_MEMORY)
        .and_then(|kind| xstream::dispatch!(kind, B => run::<B>()));
    xstream_examples::exit_code(r)
}
