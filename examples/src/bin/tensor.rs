//! A small tensor library on the type-erased path alone: a `Tensor` whose storage is an
//! `AnyBuffer` shared by views (dtype, shape, element offset), uploads from the caller's own
//! slices without a host stall (`with_registered_host`), fills of every width (`memset16/32/64`),
//! element-wise sums, maxima and minima through the built-in reduce, typed downloads, and a
//! caching allocator that hands freed blocks back out in stream order. The backend is chosen
//! at run time (host, CUDA, or Ascend: on this repository's machines the ACL runtime
//! simulator, a test double). Every result is checked against a host reference; a type the
//! device's built-in reduce lacks is reported as skipped, never as verified.
//!
//! ```sh
//! cargo run -p xstream-examples --bin tensor -- --backend host
//! ```

use std::cell::RefCell;
use std::collections::HashMap;
use std::process::ExitCode;
use std::rc::Rc;

use xstream::any::{AnyBuffer, AnyDevice, AnyStream};
use xstream::half::{bf16, f16};
use xstream::{
    BufferView, Capabilities, Error, ReduceKind, ReduceType, Reduction, Result, StreamDesc,
    StreamFlags,
};

/// Element types of the tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DType {
    F32,
    F16,
    BF16,
    I32,
    I64,
}

impl DType {
    fn size(self) -> usize {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::I64 => 8,
        }
    }

    fn reduce(self) -> ReduceType {
        match self {
            DType::F32 => ReduceType::F32,
            DType::F16 => ReduceType::F16,
            DType::BF16 => ReduceType::BF16,
            DType::I32 => ReduceType::I32,
            DType::I64 => ReduceType::I64,
        }
    }

    /// The bits of `x` as one element of this type (what a fill writes).
    fn bits(self, x: f64) -> u64 {
        match self {
            DType::F32 => u64::from((x as f32).to_bits()),
            DType::F16 => u64::from(f16::from_f64(x).to_bits()),
            DType::BF16 => u64::from(bf16::from_f64(x).to_bits()),
            DType::I32 => u64::from(x as i32 as u32),
            DType::I64 => x as i64 as u64,
        }
    }
}

/// A block of device memory from the [`Allocator`]; back to its cache when dropped.
struct Block {
    buf: Option<AnyBuffer>,
    size: usize,
    cache: Rc<RefCell<Cache>>,
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.cache
                .borrow_mut()
                .free
                .entry(self.size)
                .or_default()
                .push(b);
        }
    }
}

/// Freed blocks by size, and counts.
#[derive(Default)]
struct Cache {
    free: HashMap<usize, Vec<AnyBuffer>>,
    fresh: usize,
    reused: usize,
}

/// A caching allocator for one stream: sizes are rounded up to powers of two (at least 512
/// bytes); a freed block goes back to the cache and the next request of its size takes it
/// without asking the device. All work runs on one stream, so a block reused by later work is
/// ordered after the work of its earlier owner (the rule PyTorch's caching allocator keeps per
/// stream).
struct Allocator {
    dev: AnyDevice,
    cache: Rc<RefCell<Cache>>,
}

impl Allocator {
    fn new(dev: AnyDevice) -> Self {
        Self {
            dev,
            cache: Rc::default(),
        }
    }

    fn alloc(&self, bytes: usize) -> Result<Rc<Block>> {
        let size = bytes.max(512).next_power_of_two();
        let cached = self
            .cache
            .borrow_mut()
            .free
            .get_mut(&size)
            .and_then(Vec::pop);
        let buf = match cached {
            Some(b) => {
                self.cache.borrow_mut().reused += 1;
                b
            }
            None => {
                self.cache.borrow_mut().fresh += 1;
                self.dev.alloc(size)?
            }
        };
        Ok(Rc::new(Block {
            buf: Some(buf),
            size,
            cache: Rc::clone(&self.cache),
        }))
    }
}

/// A contiguous tensor: a dtype, a shape and an element offset into shared storage.
#[derive(Clone)]
struct Tensor {
    storage: Rc<Block>,
    dtype: DType,
    shape: Vec<usize>,
    offset: usize,
}

impl Tensor {
    fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    fn buffer(&self) -> &AnyBuffer {
        self.storage
            .buf
            .as_ref()
            .expect("a live block holds its buffer")
    }

    /// The tensor's bytes as a view of its storage.
    fn view(&self) -> Result<BufferView<'_, AnyBuffer>> {
        let sz = self.dtype.size();
        BufferView::range(self.buffer(), self.offset * sz, self.numel() * sz)
    }

    fn empty(a: &Allocator, dtype: DType, shape: &[usize]) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        Ok(Tensor {
            storage: a.alloc(n * dtype.size())?,
            dtype,
            shape: shape.to_vec(),
            offset: 0,
        })
    }

    /// Uploads the caller's `data` (registered in place for the copy: no staging, no wait
    /// for the stream's earlier work).
    fn from_slice<T: xstream::bytemuck::Pod>(
        a: &Allocator,
        s: &AnyStream,
        dtype: DType,
        shape: &[usize],
        data: &mut [T],
    ) -> Result<Tensor> {
        let t = Tensor::empty(a, dtype, shape)?;
        if std::mem::size_of_val(data) != t.numel() * dtype.size() {
            return Err(Error::invalid("from_slice: data does not match the shape"));
        }
        let v = t.view()?;
        a.dev
            .with_registered_host(data, |reg| reg.upload(s, 0, v))??;
        Ok(t)
    }

    /// Every element set to `x` (a memset of the element's width).
    fn fill_(&self, s: &AnyStream, x: f64) -> Result<()> {
        let bits = self.dtype.bits(x);
        match self.dtype.size() {
            2 => s.memset16(self.view()?, bits as u16),
            4 => s.memset32(self.view()?, bits as u32),
            _ => s.memset64(self.view()?, bits),
        }
    }

    fn full(a: &Allocator, s: &AnyStream, dtype: DType, shape: &[usize], x: f64) -> Result<Tensor> {
        let t = Tensor::empty(a, dtype, shape)?;
        t.fill_(s, x)?;
        Ok(t)
    }

    /// Rows `start..end` of the first dimension: a view sharing the storage.
    fn narrow(&self, start: usize, end: usize) -> Result<Tensor> {
        let row: usize = self.shape[1..].iter().product();
        if start > end || end > self.shape[0] {
            return Err(Error::invalid("narrow: rows outside the tensor"));
        }
        let mut shape = self.shape.clone();
        shape[0] = end - start;
        Ok(Tensor {
            storage: Rc::clone(&self.storage),
            dtype: self.dtype,
            shape,
            offset: self.offset + start * row,
        })
    }

    /// `self = kind(self, other)` element-wise, in place (the built-in reduce).
    fn combine_(&self, s: &AnyStream, kind: ReduceKind, other: &Tensor) -> Result<()> {
        if self.dtype != other.dtype || self.shape != other.shape {
            return Err(Error::invalid("combine: dtype or shape differ"));
        }
        let r = Reduction::new(kind, self.dtype.reduce());
        s.reduce_view(self.view()?, other.view()?, r)
    }

    /// A copy with its own storage.
    fn clone_data(&self, a: &Allocator, s: &AnyStream) -> Result<Tensor> {
        let t = Tensor::empty(a, self.dtype, &self.shape)?;
        s.copy_view(self.view()?, t.view()?)?;
        Ok(t)
    }

    fn to_vec<T: xstream::bytemuck::Pod + Default>(&self, s: &AnyStream) -> Result<Vec<T>> {
        let mut out = vec![T::default(); self.numel() * self.dtype.size() / size_of::<T>()];
        s.read_into_blocking(self.view()?, &mut out)?;
        Ok(out)
    }
}

/// What one check found.
enum Verdict {
    Verified,
    /// The device's built-in reduce lacks the type (its `Unsupported` error).
    Skipped(String),
}

fn check(name: &str, ok: bool) -> Result<Verdict> {
    if ok {
        Ok(Verdict::Verified)
    } else {
        Err(Error::invalid(format!(
            "{name}: differs from the host reference"
        )))
    }
}

/// Runs `f`; an `Unsupported` from the device becomes a skip.
fn or_skip(f: impl FnOnce() -> Result<Verdict>) -> Result<Verdict> {
    match f() {
        Err(Error::Unsupported { what, .. }) => Ok(Verdict::Skipped(what)),
        other => other,
    }
}

fn run(dev: AnyDevice) -> Result<()> {
    let info = dev.info().clone();
    println!(
        "backend {}, device {}: {}",
        dev.kind(),
        info.ordinal,
        info.name
    );
    let s = dev.create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))?;
    let a = Allocator::new(dev.clone());
    let reduce = info.capabilities.contains(Capabilities::REDUCE);
    const ROWS: usize = 64;
    const COLS: usize = 48;
    let n = ROWS * COLS;
    let mut checks: Vec<(&str, Verdict)> = Vec::new();

    // f32: upload, add a filled tensor, narrow and refill a band of rows.
    checks.push(("f32 upload + full + add, narrow + fill", {
        let mut host: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.5 - 20.0).collect();
        let want_up = host.clone();
        let x = Tensor::from_slice(&a, &s, DType::F32, &[ROWS, COLS], &mut host)?;
        let up_ok = x.to_vec::<f32>(&s)? == want_up;
        let y = Tensor::full(&a, &s, DType::F32, &[ROWS, COLS], 1.25)?;
        let mut want = want_up.clone();
        if reduce {
            x.combine_(&s, ReduceKind::Sum, &y)?;
            want.iter_mut().for_each(|v| *v += 1.25);
        } else {
            // Without the built-in reduce the sum is left out; the fill is still checked.
            want = vec![1.25; n];
            s.copy_view(y.view()?, x.view()?)?;
        }
        let band = x.narrow(10, 20)?;
        band.fill_(&s, -3.0)?;
        want[10 * COLS..20 * COLS].fill(-3.0);
        check("f32", up_ok && x.to_vec::<f32>(&s)? == want)?
    }));

    // f16 and bf16 sums: rounded to nearest even once, as the reference here.
    for (name, dtype) in [
        ("f16 sum (rounded once)", DType::F16),
        ("bf16 max", DType::BF16),
    ] {
        checks.push((
            name,
            or_skip(|| {
                if !reduce {
                    return Err(Error::unsupported(dev.kind(), "no built-in reduce"));
                }
                let vals: Vec<f32> = (0..n).map(|i| (i % 41) as f32 * 0.1 - 2.0).collect();
                let other: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 0.3 - 1.0).collect();
                let (got, want): (Vec<u16>, Vec<u16>) = if dtype == DType::F16 {
                    let mut p: Vec<f16> = vals.iter().map(|v| f16::from_f32(*v)).collect();
                    let mut q: Vec<f16> = other.iter().map(|v| f16::from_f32(*v)).collect();
                    let want = p
                        .iter()
                        .zip(&q)
                        .map(|(x, y)| f16::from_f32(x.to_f32() + y.to_f32()).to_bits())
                        .collect();
                    let t = Tensor::from_slice(&a, &s, dtype, &[ROWS, COLS], &mut p)?;
                    let u = Tensor::from_slice(&a, &s, dtype, &[ROWS, COLS], &mut q)?;
                    t.combine_(&s, ReduceKind::Sum, &u)?;
                    (t.to_vec::<u16>(&s)?, want)
                } else {
                    let mut p: Vec<bf16> = vals.iter().map(|v| bf16::from_f32(*v)).collect();
                    let mut q: Vec<bf16> = other.iter().map(|v| bf16::from_f32(*v)).collect();
                    let want = p
                        .iter()
                        .zip(&q)
                        .map(|(x, y)| if y > x { y.to_bits() } else { x.to_bits() })
                        .collect();
                    let t = Tensor::from_slice(&a, &s, dtype, &[ROWS, COLS], &mut p)?;
                    let u = Tensor::from_slice(&a, &s, dtype, &[ROWS, COLS], &mut q)?;
                    t.combine_(&s, ReduceKind::Max, &u)?;
                    (t.to_vec::<u16>(&s)?, want)
                };
                check(name, got == want)
            })?,
        ));
    }

    // i64: a 64-bit fill past 32 bits, a clone, and a sum where the reduce has 64-bit integers.
    checks.push(("i64 full + clone", {
        let big = 3_000_000_000_i64;
        let t = Tensor::full(&a, &s, DType::I64, &[ROWS, COLS], big as f64)?;
        let c = t.clone_data(&a, &s)?;
        t.narrow(0, 1)?.fill_(&s, -1.0)?;
        let got_t = t.to_vec::<i64>(&s)?;
        let ok = c.to_vec::<i64>(&s)? == vec![big; n]
            && got_t[..COLS] == vec![-1; COLS][..]
            && got_t[COLS..] == vec![big; n - COLS][..];
        check("i64 full + clone", ok)?
    }));
    checks.push((
        "i64 sum",
        or_skip(|| {
            let t = Tensor::full(&a, &s, DType::I64, &[n], 5_000_000_000.0)?;
            let u = Tensor::full(&a, &s, DType::I64, &[n], -7.0)?;
            t.combine_(&s, ReduceKind::Sum, &u)?;
            check("i64 sum", t.to_vec::<i64>(&s)? == vec![4_999_999_993; n])
        })?,
    ));

    // i32 min over views of one tensor (rows 0..32 against rows 32..64).
    checks.push((
        "i32 min of two views",
        or_skip(|| {
            let mut host: Vec<i32> = (0..n as i32).map(|i| (i * 7919) % 1000 - 500).collect();
            let want: Vec<i32> = (0..n / 2).map(|i| host[i].min(host[i + n / 2])).collect();
            let t = Tensor::from_slice(&a, &s, DType::I32, &[ROWS, COLS], &mut host)?;
            let (lo, hi) = (t.narrow(0, ROWS / 2)?, t.narrow(ROWS / 2, ROWS)?);
            lo.combine_(&s, ReduceKind::Min, &hi)?;
            check("i32 min", lo.to_vec::<i32>(&s)? == want)
        })?,
    ));

    s.synchronize()?;
    let cache = a.cache.borrow();
    let (verified, skipped): (Vec<_>, Vec<_>) = checks
        .iter()
        .partition(|(_, v)| matches!(v, Verdict::Verified));
    for (name, v) in &skipped {
        if let Verdict::Skipped(why) = v {
            println!("skipped: {name}: {why}");
        }
    }
    println!(
        "allocator: {} blocks from the device, {} reused from the cache",
        cache.fresh, cache.reused
    );
    println!(
        "verified: {} of {} tensor checks match the host reference ({} skipped)",
        verified.len(),
        checks.len(),
        skipped.len()
    );
    if cache.reused == 0 {
        return Err(Error::invalid("the caching allocator never reused a block"));
    }
    Ok(())
}

fn main() -> ExitCode {
    xstream_examples::init_tracing();
    let r = xstream_examples::choose_backend(Capabilities::empty())
        .and_then(|kind| AnyDevice::open(kind, 0))
        .and_then(run);
    xstream_examples::exit_code(r)
}
