//! Views, typed copies, 16/32-bit memsets, zero-length buffers and kernel-argument aliasing.

use xstream_core::module::{lcg_launch, BUILTIN_LCG};
use xstream_core::{
    lcg_reference, Backend, BackendKind, Buffer, BufferView, Capabilities, Device, DeviceSlice,
    Error, HostModule, KernelArg, LaunchConfig, Module, ModuleSource, ParamKind, PinnedAllocDesc,
    Stream,
};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env};

fn invalid<T: std::fmt::Debug>(
    what: &str,
    r: xstream_core::Result<T>,
    needle: &str,
) -> Result<(), String> {
    match r {
        Err(Error::InvalidArgument(m)) if m.contains(needle) => Ok(()),
        other => Err(format!(
            "{what}: expected InvalidArgument containing {needle:?}, got {other:?}"
        )),
    }
}

fn words(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Views and typed slices: ranges, splits, alignment and range errors; every stream
/// operation through a view; typed copies (synchronous and over page-locked memory); a
/// builtin kernel on a view touches only the view.
pub(crate) fn views_and_typed_copies<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let buf = dev.alloc(64).ctx("alloc")?;
    let all = buf.typed::<u32>().ctx("typed")?;
    ensure!(
        all.len() == 16,
        "u32 slice of 64 bytes has {} elements",
        all.len()
    );
    let mid = all.slice(2..6).ctx("slice 2..6")?;
    ensure!(
        mid.offset_bytes() == 8 && mid.len_bytes() == 16,
        "slice 2..6 at byte {} of {} bytes",
        mid.offset_bytes(),
        mid.len_bytes()
    );
    ensure!(
        mid.device_address() == buf.device_address() + 8,
        "slice address is not buffer + 8"
    );
    let (lo, hi) = all.split_at(4).ctx("split_at")?;
    ensure!(
        lo.len() == 4 && hi.len() == 12,
        "split_at(4) gave {} + {}",
        lo.len(),
        hi.len()
    );
    // Errors, each named.
    invalid(
        "slice past the end",
        all.slice(3..20).map(|_| ()),
        "outside",
    )?;
    invalid(
        "split past the end",
        all.split_at(17).map(|_| ()),
        "outside",
    )?;
    invalid(
        "misaligned typed view",
        BufferView::range(&buf, 2, 8).and_then(|v| v.typed::<u32>()),
        "alignment",
    )?;
    invalid(
        "partial element",
        BufferView::range(&buf, 0, 6).and_then(|v| v.typed::<u32>()),
        "whole number",
    )?;
    invalid(
        "view out of range",
        BufferView::range(&buf, 60, 8),
        "outside",
    )?;
    invalid(
        "zero-sized element",
        DeviceSlice::<(), _>::new(&buf),
        "zero-sized",
    )?;
    invalid(
        "write_from_blocking longer than the view",
        s.write_from_blocking(mid, &[0u32; 5]),
        "outside",
    )?;
    let mut five = [0u32; 5];
    invalid(
        "read_into_blocking longer than the view",
        s.read_into_blocking(mid, &mut five),
        "outside",
    )?;
    invalid(
        "memset32 at a 2-byte offset",
        s.memset32(BufferView::range(&buf, 2, 8).ctx("view")?, 1),
        "multiples of 4",
    )?;
    invalid(
        "copy_view of unequal lengths",
        s.copy_view(lo, hi),
        "destination of",
    )?;

    // Operations through views against a model of the buffer.
    let mut model = [0u32; 16];
    s.write_from_blocking(&buf, &model)
        .ctx("write_from_blocking whole")?;
    s.write_from_blocking(mid, &[1u32, 2, 3, 4])
        .ctx("write_from_blocking slice")?;
    model[2..6].copy_from_slice(&[1, 2, 3, 4]);
    s.memset32(all.slice(8..10).ctx("slice")?, 0xdead_beef)
        .ctx("memset32")?;
    model[8..10].fill(0xdead_beef);
    s.memset16(BufferView::range(&buf, 48, 4).ctx("view")?, 0x0102)
        .ctx("memset16")?;
    model[12] = 0x0102_0102;
    s.memset_view(BufferView::range(&buf, 52, 2).ctx("view")?, 0x7f)
        .ctx("memset_view")?;
    model[13] = 0x0000_7f7f;
    s.copy_view(
        all.slice(2..4).ctx("slice")?,
        all.slice(14..16).ctx("slice")?,
    )
    .ctx("copy_view")?;
    model[14] = 1;
    model[15] = 2;
    let mut back = [0u32; 16];
    s.read_into_blocking(&buf, &mut back)
        .ctx("read_into_blocking")?;
    ensure!(
        back == model,
        "after view operations: {back:x?}, expected {model:x?}"
    );
    let rb = s.read_view(hi).ctx("read_view")?;
    s.synchronize().ctx("sync")?;
    ensure!(
        words(&rb.take().ctx("readback")?) == model[4..],
        "read_view of elements 4.. differs"
    );
    let mut two = [0u32; 2];
    s.read_into_blocking(all.slice(8..10).ctx("slice")?, &mut two)
        .ctx("read_into_blocking slice")?;
    ensure!(
        two == [0xdead_beef; 2],
        "read_into_blocking of a slice: {two:x?}"
    );

    // Asynchronous typed copies over page-locked memory.
    let mut h = dev
        .alloc_pinned(16, &PinnedAllocDesc::new())
        .ctx("alloc_pinned")?;
    h.typed_mut::<u32>()
        .ctx("typed_mut")?
        .copy_from_slice(&[7, 8, 9, 10]);
    s.write_from_host(&h, 0, all.slice(0..4).ctx("slice")?)
        .ctx("write_from_host")?;
    model[..4].copy_from_slice(&[7, 8, 9, 10]);
    let mut h2 = dev
        .alloc_pinned(16, &PinnedAllocDesc::new())
        .ctx("alloc_pinned")?;
    s.read_into_host(all.slice(2..6).ctx("slice")?, &mut h2, 0)
        .ctx("read_into_host")?;
    ensure!(
        h2.typed::<u32>().ctx("typed")? == &model[2..6],
        "read_into_host: {:?}",
        h2.typed::<u32>()
    );

    // A builtin kernel on a view: only the view's words change.
    let mut kernel = "no builtin kernel on this device";
    if dev.info().capabilities.contains(Capabilities::KERNELS) {
        let f = dev
            .builtin_module()
            .and_then(|m| m.function(BUILTIN_LCG))
            .ctx("builtin lcg")?;
        let v = all.slice(4..8).ctx("slice")?;
        let (n, cfg) = lcg_launch(v.len_bytes()).ctx("lcg_launch")?;
        s.launch_kernel(
            &f,
            &cfg,
            &[
                KernelArg::View(v.as_view()),
                KernelArg::U32(n),
                KernelArg::U32(3),
            ],
        )
        .ctx("launch on a view")?;
        let mut expect: Vec<u8> = model.iter().flat_map(|w| w.to_le_bytes()).collect();
        lcg_reference(&mut expect[16..32], 3);
        let got = read_all::<B>(&s, &buf)?;
        ensure!(
            got == expect,
            "lcg on words 4..8 changed other words or missed some"
        );
        kernel = "the builtin lcg on a view touched exactly its words";
    }
    pass(format!(
        "slices, splits and their errors; memset/16/32, write/read/copy through views; typed \
         copies sync and page-locked; {kernel}"
    ))
}

/// Zero-length buffers and operations: allocation succeeds, every zero-length copy and
/// memset is a no-op, out-of-range is still refused.
pub(crate) fn zero_length<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let z = dev.alloc(0).ctx("alloc(0)")?;
    ensure!(
        z.is_empty() && z.len() == 0,
        "alloc(0) has length {}",
        z.len()
    );
    let z2 = dev.alloc(0).ctx("second alloc(0)")?;
    ensure!(
        z.device_address() != z2.device_address(),
        "two zero-length buffers share the address {:#x}",
        z.device_address()
    );
    let b = dev.alloc(16).ctx("alloc 16")?;
    s.write(&b, 0, (1..=16).collect()).ctx("write")?;
    s.memset(&z, 0, 0, 1).ctx("memset of 0 bytes")?;
    s.memset32(&z, 1).ctx("memset32 of 0 bytes")?;
    s.memset16(&z, 1).ctx("memset16 of 0 bytes")?;
    s.write(&z, 0, Vec::new()).ctx("write of 0 bytes")?;
    s.copy(&z, 0, &b, 16, 0).ctx("copy of 0 bytes")?;
    s.copy(&b, 3, &b, 9, 0)
        .ctx("copy of 0 bytes within a buffer")?;
    s.write_from_blocking(&z, &[] as &[f32])
        .ctx("write_from_blocking of 0 elements")?;
    s.read_into_blocking(&z, &mut [] as &mut [u64])
        .ctx("read_into_blocking of 0 elements")?;
    let v = b.view().slice(8..8).ctx("empty view")?;
    s.memset_view(v, 0xff).ctx("memset of an empty view")?;
    s.memset32(b.view().slice(16..).ctx("tail view")?, 5)
        .ctx("memset32 of the empty tail")?;
    let h = dev
        .alloc_pinned(8, &PinnedAllocDesc::new())
        .ctx("alloc_pinned")?;
    s.copy_to_device(&h, 0, &b, 4, 0)
        .ctx("copy_to_device of 0 bytes")?;
    ensure!(
        z.typed::<f32>().ctx("typed")?.is_empty(),
        "typed view of a zero-length buffer is not empty"
    );
    invalid(
        "memset past a zero-length buffer",
        s.memset(&z, 0, 1, 0),
        "outside",
    )?;
    invalid(
        "view past a zero-length buffer",
        BufferView::range(&z, 1, 0),
        "outside",
    )?;
    let empty = s.read(&z, 0, 0).ctx("read of 0 bytes")?;
    let got = read_all::<B>(&s, &b)?;
    ensure!(
        got == (1..=16).collect::<Vec<u8>>(),
        "zero-length operations changed bytes: {got:?}"
    );
    ensure!(
        empty.take().ctx("readback")?.is_empty(),
        "a zero-length read returned bytes"
    );
    pass("alloc(0) gives distinct empty buffers; zero-length memsets (8/16/32), writes, copies, typed and page-locked copies are no-ops; out of range still refused")
}

/// PTX of `xs_add(u32* a, u32* b, u32* out, u32 words)`: `out[i] = a[i] + b[i]`, one thread
/// per word, each reading its inputs before storing (so the arguments may alias).
pub const ADD_PTX: &str = r#".version 8.0
.target sm_70
.address_size 64

.visible .entry xs_add(.param .u64 xs_add_a, .param .u64 xs_add_b, .param .u64 xs_add_out, .param .u32 xs_add_words)
{
    .reg .pred %p<2>;
    .reg .u32 %r<8>;
    .reg .u64 %rd<8>;
    ld.param.u64 %rd1, [xs_add_a];
    ld.param.u64 %rd2, [xs_add_b];
    ld.param.u64 %rd3, [xs_add_out];
    ld.param.u32 %r1, [xs_add_words];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.u32 %r2, %r3, %r4, %r2;
    setp.ge.u32 %p1, %r2, %r1;
    @%p1 bra XS_ADD_DONE;
    mul.wide.u32 %rd4, %r2, 4;
    add.u64 %rd5, %rd1, %rd4;
    add.u64 %rd6, %rd2, %rd4;
    add.u64 %rd7, %rd3, %rd4;
    ld.global.u32 %r5, [%rd5];
    ld.global.u32 %r6, [%rd6];
    add.u32 %r7, %r5, %r6;
    st.global.u32 [%rd7], %r7;
XS_ADD_DONE:
    ret;
}
"#;

/// The simulator-format binary holding `xs_add` (its built-in 5, add: pointer, pointer,
/// pointer, u32). Only the ACL runtime simulator runs it.
pub const ADD_ASCEND_SIM: &[u8] =
    b"XSIMKBIN\x01\0\0\0\x01\0\0\0\x06\0xs_add\x05\0\0\0\x04\x01\x01\x01\x02";

/// The host twin of [`ADD_PTX`].
pub fn add_host_module() -> HostModule {
    HostModule::new().with_kernel(
        "xs_add",
        &[
            ParamKind::Buffer,
            ParamKind::Buffer,
            ParamKind::Buffer,
            ParamKind::U32,
        ],
        |_, args| {
            let n = args[3].u32()? as usize;
            let a = words(args[0].buffer()?);
            let b = words(args[1].buffer()?);
            let out = args[2].buffer()?;
            for i in 0..n {
                out[4 * i..4 * i + 4].copy_from_slice(&a[i].wrapping_add(b[i]).to_le_bytes());
            }
            Ok(())
        },
    )
}

fn add_source(kind: BackendKind) -> ModuleSource<'static> {
    match kind {
        BackendKind::Host => ModuleSource::Host(add_host_module()),
        BackendKind::Cuda => ModuleSource::Ptx(ADD_PTX),
        BackendKind::Ascend => ModuleSource::AscendBinary(ADD_ASCEND_SIM),
    }
}

/// The aliasing rules of docs/semantics.md: the same buffer as two read-only inputs
/// (`out = a + a`), an output equal to an input (`a = a + b`), and disjoint views of one
/// buffer as inputs and output, with the same results on every backend.
pub(crate) fn kernel_aliasing<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::MODULES, "modules and kernels");
    if B::KIND == BackendKind::Ascend {
        need!(
            env,
            Capabilities::KERNELS,
            "the simulator-format user kernel"
        );
    }
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let m = dev.load_module(&add_source(B::KIND)).ctx("load xs_add")?;
    let f = m.function("xs_add").ctx("function")?;
    const N: u32 = 64;
    let cfg = LaunchConfig::for_items(N, 32);
    let a = dev.alloc(4 * N as usize).ctx("alloc a")?;
    let b = dev.alloc(4 * N as usize).ctx("alloc b")?;
    let out = dev.alloc(4 * N as usize).ctx("alloc out")?;
    let av: Vec<u32> = (0..N).map(|i| i * 3 + 1).collect();
    let bv: Vec<u32> = (0..N).map(|i| 1000 + i).collect();
    s.write_from_blocking(&a, &av).ctx("write a")?;
    s.write_from_blocking(&b, &bv).ctx("write b")?;
    // out = a + a: one buffer as two inputs.
    s.launch_kernel(
        &f,
        &cfg,
        &[
            KernelArg::Buffer(&a),
            KernelArg::Buffer(&a),
            KernelArg::Buffer(&out),
            KernelArg::U32(N),
        ],
    )
    .ctx("launch out = a + a")?;
    let mut got = vec![0u32; N as usize];
    s.read_into_blocking(&out, &mut got).ctx("read out")?;
    let want: Vec<u32> = av.iter().map(|x| x * 2).collect();
    ensure!(
        got == want,
        "out = a + a: {:?}.. expected {:?}..",
        &got[..4],
        &want[..4]
    );
    // a = a + b: the output is an input.
    s.launch_kernel(
        &f,
        &cfg,
        &[
            KernelArg::Buffer(&a),
            KernelArg::Buffer(&b),
            KernelArg::Buffer(&a),
            KernelArg::U32(N),
        ],
    )
    .ctx("launch a = a + b")?;
    s.read_into_blocking(&a, &mut got).ctx("read a")?;
    let a2: Vec<u32> = av.iter().zip(&bv).map(|(x, y)| x + y).collect();
    ensure!(
        got == a2,
        "a = a + b: {:?}.. expected {:?}..",
        &got[..4],
        &a2[..4]
    );
    // Views of one buffer: b[..half] = b[..half] + b[half..].
    let half = N as usize / 2;
    let bs = b.typed::<u32>().ctx("typed")?;
    let (lo, hi) = bs.split_at(half).ctx("split")?;
    s.launch_kernel(
        &f,
        &LaunchConfig::for_items(half as u32, 32),
        &[
            KernelArg::View(lo.as_view()),
            KernelArg::View(hi.as_view()),
            KernelArg::View(lo.as_view()),
            KernelArg::U32(half as u32),
        ],
    )
    .ctx("launch on views of one buffer")?;
    s.read_into_blocking(&b, &mut got).ctx("read b")?;
    let mut b2 = bv.clone();
    for i in 0..half {
        b2[i] = bv[i] + bv[half + i];
    }
    ensure!(
        got == b2,
        "views: {:?}.. expected {:?}..",
        &got[..4],
        &b2[..4]
    );
    pass("out = a + a, a = a + b and disjoint views of one buffer give the reference results")
}

/// 64-bit fills (`memset64`, what `full(i64 | u64 | f64)` needs): distinct and equal halves,
/// a fill larger than any staging a backend may use, element alignment refused, zero length a
/// no-op; every element read back.
pub(crate) fn fill64<B: Backend>(env: &Env<B>) -> CheckResult {
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create_stream")?;
    // 1 MiB + 3 elements: past a power of two, so an emulation that doubles a staged prefix
    // must handle the tail.
    const N: usize = (1 << 17) + 3;
    let buf = dev.alloc(N * 8).ctx("alloc")?;
    s.memset(&buf, 0, N * 8, 0x11).ctx("memset")?;
    let mut model = vec![0x1111_1111_1111_1111u64; N];
    let all = buf.typed::<u64>().ctx("typed")?;
    let pi = std::f64::consts::PI.to_bits();
    s.memset64(all.slice(1..N - 1).ctx("slice")?, pi)
        .ctx("memset64 of distinct halves")?;
    model[1..N - 1].fill(pi);
    let same = 0x0bad_cafe_0bad_cafe_u64;
    s.memset64(all.slice(5..9).ctx("slice")?, same)
        .ctx("memset64 of equal halves")?;
    model[5..9].fill(same);
    s.memset64(all.slice(7..7).ctx("slice")?, 0)
        .ctx("memset64 of 0 bytes")?;
    invalid(
        "memset64 at a 4-byte offset",
        s.memset64(BufferView::range(&buf, 4, 16).ctx("view")?, 1),
        "multiples of 8",
    )?;
    invalid(
        "memset64 of a partial element",
        s.memset64(BufferView::range(&buf, 8, 12).ctx("view")?, 1),
        "multiples of 8",
    )?;
    let mut back = vec![0u64; N];
    s.read_into_blocking(&buf, &mut back)
        .ctx("read_into_blocking")?;
    if let Some(i) = (0..N).find(|&i| back[i] != model[i]) {
        return Err(format!(
            "element {i} after the 64-bit fills is {:#x}, expected {:#x}",
            back[i], model[i]
        ));
    }
    let f = f64::from_bits(back[N / 2]);
    ensure!(f == std::f64::consts::PI, "an f64 fill read back as {f}");
    pass(format!(
        "{N} elements: distinct halves, equal halves, zero length, misaligned and partial ranges refused"
    ))
}
