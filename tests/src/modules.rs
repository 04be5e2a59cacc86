//! Modules and kernels: the builtin module against its host reference, launches inside a
//! capture, a user kernel per backend, and the errors of bad launches.

use xstream_core::launch::{ByValue, RawBytes};
use xstream_core::module::{
    lcg_launch, BUILTIN_DELAY, BUILTIN_DELAY_PARAMS, BUILTIN_ECHO, BUILTIN_LCG, BUILTIN_LCG_PARAMS,
    ECHO_RECORD_BYTES,
};
use xstream_core::{
    Backend, BackendKind, Buffer, Capabilities, CaptureMode, Device, Error, Function, Graph,
    HostModule, KernelArg, LaunchConfig, Module, ModuleSource, ParamKind, Stream,
};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env};

/// PTX of `xs_fill(u32* data, u32 words, u32 value)`: one thread per word stores `value`.
/// The user kernel of the CUDA side of the `module_user_kernel` check (and of the CUDA tests).
pub const FILL_PTX: &str = r#".version 8.0
.target sm_70
.address_size 64

.visible .entry xs_fill(.param .u64 xs_fill_data, .param .u32 xs_fill_words, .param .u32 xs_fill_value)
{
    .reg .pred %p<2>;
    .reg .u32 %r<6>;
    .reg .u64 %rd<4>;
    ld.param.u64 %rd1, [xs_fill_data];
    ld.param.u32 %r1, [xs_fill_words];
    ld.param.u32 %r2, [xs_fill_value];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r3, %tid.x;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mad.lo.u32 %r3, %r4, %r5, %r3;
    setp.ge.u32 %p1, %r3, %r1;
    @%p1 bra XS_FILL_DONE;
    mul.wide.u32 %rd2, %r3, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
XS_FILL_DONE:
    ret;
}
"#;

/// The host twin of [`FILL_PTX`]: `xs_fill(buffer, u32 words, u32 value)`.
pub fn fill_host_module() -> HostModule {
    HostModule::new().with_kernel(
        "xs_fill",
        &[ParamKind::Buffer, ParamKind::U32, ParamKind::U32],
        |_, args| {
            let words = args[1].u32()? as usize;
            let value = args[2].u32()?.to_le_bytes();
            let buf = args[0].buffer()?;
            for w in buf.chunks_exact_mut(4).take(words) {
                w.copy_from_slice(&value);
            }
            Ok(())
        },
    )
}

fn seeded(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 37 % 253) as u8).collect()
}

/// Launches the builtin LCG over `buf` on `s`.
fn launch_lcg<B: Backend>(
    s: &B::Stream,
    f: &B::Function,
    buf: &B::Buffer,
    rounds: u32,
) -> Result<(), String> {
    let (words, cfg) = lcg_launch(buf.len()).ctx("lcg_launch")?;
    s.launch_kernel(
        f,
        &cfg,
        &[
            KernelArg::Buffer(buf),
            KernelArg::U32(words),
            KernelArg::U32(rounds),
        ],
    )
    .ctx("launch_kernel(xstream_lcg)")
}

pub(crate) fn module_builtin_lcg<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::MODULES, "modules and kernels");
    need!(env, Capabilities::KERNELS, "the builtin module");
    let dev = &env.device;
    let m = dev.builtin_module().ctx("builtin_module")?;
    let lcg = m.function(BUILTIN_LCG).ctx("function(xstream_lcg)")?;
    let delay = m.function(BUILTIN_DELAY).ctx("function(xstream_delay)")?;
    ensure!(lcg.name() == BUILTIN_LCG, "name() = {:?}", lcg.name());
    if let Some(p) = lcg.params() {
        ensure!(p == BUILTIN_LCG_PARAMS, "xstream_lcg params {p:?}");
    }
    if let Some(p) = delay.params() {
        ensure!(p == BUILTIN_DELAY_PARAMS, "xstream_delay params {p:?}");
    }
    let s = dev.create_stream(&nb()).ctx("create")?;
    let n = 1 << 16;
    let data = seeded(n);
    let buf = dev.alloc(n).ctx("alloc")?;
    s.write(&buf, 0, data.clone()).ctx("write")?;
    s.launch_kernel(&delay, &LaunchConfig::single(), &[KernelArg::U64(1000)])
        .ctx("launch_kernel(xstream_delay)")?;
    launch_lcg::<B>(&s, &lcg, &buf, 5)?;
    // The function outlives its module handle.
    drop(m);
    launch_lcg::<B>(&s, &lcg, &buf, 4)?;
    let got = read_all::<B>(&s, &buf)?;
    let mut want = data;
    crate::reference::lcg_jump(&mut want, 9);
    ensure!(
        got == want,
        "xstream_lcg result differs from the host reference"
    );
    pass(format!(
        "{n} bytes, 5 + 4 rounds, identical to the reference"
    ))
}

pub(crate) fn module_launch_in_capture<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::MODULES, "modules and kernels");
    need!(env, Capabilities::KERNELS, "the builtin module");
    need!(env, Capabilities::CAPTURE, "stream capture");
    let dev = &env.device;
    let lcg = dev
        .builtin_module()
        .ctx("builtin_module")?
        .function(BUILTIN_LCG)
        .ctx("function")?;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let n = 4096;
    let data = seeded(n);
    let buf = dev.alloc(n).ctx("alloc")?;
    s.write(&buf, 0, data.clone()).ctx("write")?;
    s.synchronize().ctx("sync")?;
    s.begin_capture(CaptureMode::ThreadLocal)
        .ctx("begin_capture")?;
    launch_lcg::<B>(&s, &lcg, &buf, 3)?;
    let g = s.end_capture().ctx("end_capture")?;
    drop(lcg);
    let before = read_all::<B>(&s, &buf)?;
    ensure!(before == data, "a captured launch ran before the replay");
    g.replay(&s).ctx("replay 1")?;
    g.replay(&s).ctx("replay 2")?;
    let got = read_all::<B>(&s, &buf)?;
    let mut want = data;
    crate::reference::lcg_jump(&mut want, 6);
    ensure!(
        got == want,
        "two replays differ from 2 x 3 rounds of the reference"
    );
    pass(format!(
        "graph of {} node(s) replayed twice = 6 rounds",
        g.node_count()
    ))
}

/// The Ascend twin of [`FILL_PTX`]: `xs_fill` in the ACL runtime simulator's test-only binary
/// format (magic, version 1, one kernel: the 7-byte name `xs_fill` mapped to the simulator's
/// built-in 4, fill, with parameter kinds pointer, u32, u32). Only the simulator runs it;
/// `xstream_ascend::module::sim_binary` writes the same bytes (checked by the Ascend tests).
pub const FILL_ASCEND_SIM: &[u8] =
    b"XSIMKBIN\x01\0\0\0\x01\0\0\0\x07\0xs_fill\x04\0\0\0\x03\x01\x02\x02";

/// A user module of the backend's own kind holding `xs_fill`.
fn fill_source(kind: BackendKind) -> ModuleSource<'static> {
    match kind {
        BackendKind::Host => ModuleSource::Host(fill_host_module()),
        BackendKind::Cuda => ModuleSource::Ptx(FILL_PTX),
        BackendKind::Ascend => ModuleSource::AscendBinary(FILL_ASCEND_SIM),
    }
}

pub(crate) fn module_user_kernel<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::MODULES, "modules and kernels");
    if B::KIND == BackendKind::Ascend {
        // The suite's Ascend kernel is a simulator-format binary: where the builtin module
        // (the same format) does not load, neither does it.
        need!(
            env,
            Capabilities::KERNELS,
            "the simulator's kernel-binary format"
        );
    }
    let src = fill_source(B::KIND);
    let dev = &env.device;
    let m = dev.load_module(&src).ctx("load_module")?;
    let fill = m.function("xs_fill").ctx("function(xs_fill)")?;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let words = 1000u32;
    let buf = dev.alloc(words as usize * 4 + 8).ctx("alloc")?;
    s.launch_kernel(
        &fill,
        &LaunchConfig::for_items(words, 128),
        &[
            KernelArg::Buffer(&buf),
            KernelArg::U32(words),
            KernelArg::U32(0xA5A5_0001),
        ],
    )
    .ctx("launch_kernel(xs_fill)")?;
    drop((m, fill));
    let got = read_all::<B>(&s, &buf)?;
    let (filled, tail) = got.split_at(words as usize * 4);
    ensure!(
        filled
            .chunks_exact(4)
            .all(|w| w == 0xA5A5_0001u32.to_le_bytes()),
        "xs_fill left words unfilled"
    );
    ensure!(tail == [0u8; 8], "xs_fill wrote past its words: {tail:?}");
    pass(format!(
        "{words} words filled over 8 blocks of 128 threads, tail untouched"
    ))
}

fn expect_invalid(what: &str, r: xstream_core::Result<()>, needle: &str) -> Result<(), String> {
    match r {
        Err(Error::InvalidArgument(m)) if m.contains(needle) => Ok(()),
        Err(e) => Err(format!(
            "{what}: expected InvalidArgument mentioning {needle:?}, got {e}"
        )),
        Ok(()) => Err(format!("{what}: accepted")),
    }
}

pub(crate) fn module_bad_input<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::MODULES, "modules and kernels");
    need!(env, Capabilities::KERNELS, "the builtin module");
    let dev = &env.device;
    let m = dev.builtin_module().ctx("builtin_module")?;
    match m.function("xstream_no_such_kernel") {
        Err(Error::InvalidArgument(msg)) if msg.contains("xstream_no_such_kernel") => {}
        other => return Err(format!("missing function: {other:?}")),
    }
    for (what, name, needle) in [
        ("an empty name", "", "empty"),
        ("a name with a NUL byte", "xstream_lcg\0", "NUL"),
    ] {
        match m.function(name) {
            Err(Error::InvalidArgument(msg)) if msg.contains(needle) => {}
            other => return Err(format!("{what}: {other:?}")),
        }
    }
    let lcg = m.function(BUILTIN_LCG).ctx("function")?;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let buf = dev.alloc(64).ctx("alloc")?;
    let good = [
        KernelArg::Buffer(&buf),
        KernelArg::U32(16),
        KernelArg::U32(1),
    ];
    let cfg = LaunchConfig::linear(1, 16);
    expect_invalid(
        "two arguments for three parameters",
        s.launch_kernel(&lcg, &cfg, &good[..2]),
        "argument",
    )?;
    expect_invalid(
        "a u64 where a u32 goes",
        s.launch_kernel(
            &lcg,
            &cfg,
            &[
                KernelArg::Buffer(&buf),
                KernelArg::U64(16),
                KernelArg::U32(1),
            ],
        ),
        "argument 1",
    )?;
    for (label, bad) in [
        ("zero grid", LaunchConfig::new([1, 0, 1], [16, 1, 1])),
        ("zero block", LaunchConfig::linear(1, 0)),
    ] {
        expect_invalid(label, s.launch_kernel(&lcg, &bad, &good), "is 0")?;
    }
    let other = match B::KIND {
        BackendKind::Host => ModuleSource::Ptx(FILL_PTX),
        _ => ModuleSource::Host(fill_host_module()),
    };
    match dev.load_module(&other) {
        Err(Error::Unsupported { .. }) => {}
        other => return Err(format!("a source of another backend: {other:?}")),
    }
    // Nothing bad was enqueued: the stream still works and the buffer is untouched.
    s.launch_kernel(&lcg, &cfg, &good).ctx("good launch")?;
    let got = read_all::<B>(&s, &buf)?;
    let mut want = vec![0u8; 64];
    crate::reference::lcg_jump(&mut want, 1);
    ensure!(got == want, "refused launches changed the buffer");
    pass(
        "missing, empty and NUL names, count, kind, zero dims and foreign source refused; stream \
         still usable",
    )
}

/// The struct [`xstream_core::module::BUILTIN_ECHO`] takes by value:
/// `#[repr(C)] { u16 a; i8 b; u8 pad[5]; f64 c; }` (16 bytes; the padding C would insert is an
/// explicit field, so every byte passed is initialised).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EchoStruct {
    /// Written at offset 0 of the record.
    pub a: u16,
    /// Written at offset 2.
    pub b: i8,
    /// Padding (not written).
    pub pad: [u8; 5],
    /// Written at offset 8.
    pub c: f64,
}

// SAFETY: `repr(C)`, fields of 2 + 1 + 5 + 8 bytes at offsets 0, 2, 3, 8: no implicit padding;
// every bit pattern of each field is valid.
#[allow(unsafe_code)]
unsafe impl bytemuck::Zeroable for EchoStruct {}
// SAFETY: as above; `Copy + 'static`.
#[allow(unsafe_code)]
unsafe impl bytemuck::Pod for EchoStruct {}

fn echo_want(s: &EchoStruct, x: i8, y: u16, z: i64, w: f32) -> [u8; ECHO_RECORD_BYTES] {
    let mut b = [0u8; 16];
    b.copy_from_slice(bytemuck::bytes_of(s));
    xstream_core::module::echo_record(&b, x, y, z, w)
}

pub(crate) fn launch_builder_widths<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::MODULES, "modules and kernels");
    need!(env, Capabilities::KERNELS, "the builtin module");
    let dev = &env.device;
    let echo = dev
        .builtin_module()
        .ctx("builtin_module")?
        .function(BUILTIN_ECHO)
        .ctx("function(xstream_echo_params)")?;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let buf = dev.alloc(64).ctx("alloc")?;
    // Seed the record's padding bytes: the kernel must leave them alone.
    s.write(&buf, 0, vec![0xEE; 64]).ctx("write")?;
    let st = EchoStruct {
        a: 0xBEEF,
        b: -7,
        pad: [0; 5],
        c: -1.25e300,
    };
    let (x, y, z, w) = (-128i8, 0xFFFEu16, i64::MIN + 3, 3.5f32);
    s.launch_builder(&echo)
        .arg(&buf)
        .arg(ByValue(&st))
        .arg(x)
        .arg(y)
        .arg(z)
        .arg(w)
        .launch()
        .ctx("builder launch(xstream_echo_params)")?;
    let got = read_all::<B>(&s, &buf)?;
    let mut want = vec![0xEEu8; 64];
    let rec = echo_want(&st, x, y, z, w);
    for r in [0..3, 8..17, 18..20, 24..36] {
        want[r.clone()].copy_from_slice(&rec[r]);
    }
    ensure!(
        got == want,
        "the echoed record differs:\n got  {:02x?}\n want {:02x?}",
        &got[..40],
        &want[..40]
    );
    pass("u16/i8/f64 struct by value, i8, u16, i64, f32 reached the kernel intact; padding untouched")
}

fn expect_unsupported(what: &str, r: xstream_core::Result<()>) -> Result<(), String> {
    match r {
        Err(e) if e.is_unsupported() => Ok(()),
        Err(e) => Err(format!("{what}: expected Unsupported, got {e}")),
        Ok(()) => Err(format!("{what}: accepted")),
    }
}

pub(crate) fn launch_builder_bad_args<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::MODULES, "modules and kernels");
    need!(env, Capabilities::KERNELS, "the builtin module");
    let dev = &env.device;
    let echo = dev
        .builtin_module()
        .ctx("builtin_module")?
        .function(BUILTIN_ECHO)
        .ctx("function(xstream_echo_params)")?;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let buf = dev.alloc(64).ctx("alloc")?;
    let st = EchoStruct {
        a: 1,
        b: 2,
        pad: [0; 5],
        c: 3.0,
    };
    let short = [0u8; 12];
    let mut l = s.launch_builder(&echo);
    l.arg(&buf).arg(ByValue(&st)).arg(1i8).arg(2u16).arg(3i64);
    expect_invalid("five arguments for six parameters", l.launch(), "argument")?;
    l.clear_args();
    l.arg(&buf)
        .arg(ByValue(&st))
        .arg(1i8)
        .arg(2u32)
        .arg(3i64)
        .arg(4.0f32);
    expect_invalid("a u32 where a u16 goes", l.launch(), "argument 3")?;
    l.clear_args();
    l.arg(&buf)
        .arg(RawBytes(&short))
        .arg(1i8)
        .arg(2u16)
        .arg(3i64)
        .arg(4.0f32);
    expect_invalid(
        "12 bytes where a 16-byte struct goes",
        l.launch(),
        "argument 1",
    )?;
    l.clear_args();
    l.arg(&buf)
        .arg(ByValue(&st))
        .arg(1i8)
        .arg(2u16)
        .arg(3i64)
        .arg(4.0f32);
    let attr_detail = if B::KIND == BackendKind::Cuda {
        // CUDA has clusters: a grid that is no multiple of the cluster is refused instead.
        l.config(LaunchConfig::linear(3, 1)).cluster([2, 1, 1]);
        expect_invalid("grid 3 with clusters of 2", l.launch(), "multiple")?;
        "a grid not a multiple of its cluster refused"
    } else {
        l.cooperative(true);
        expect_unsupported("a cooperative launch", l.launch())?;
        l.cooperative(false).cluster([1, 1, 1]);
        expect_unsupported("cluster dimensions", l.launch())?;
        "cooperative launch and clusters refused (Unsupported)"
    };
    // Nothing was enqueued: the buffer is untouched; a good launch still works.
    l.attrs(Default::default()).config(LaunchConfig::single());
    let before = read_all::<B>(&s, &buf)?;
    ensure!(before == vec![0u8; 64], "a refused launch wrote the buffer");
    l.launch().ctx("good launch")?;
    let got = read_all::<B>(&s, &buf)?;
    // The buffer was zero: the record's padding stays zero, as `echo_record` leaves it.
    ensure!(
        got[..ECHO_RECORD_BYTES] == echo_want(&st, 1, 2, 3, 4.0)[..],
        "the good launch after refusals wrote {:02x?}",
        &got[..ECHO_RECORD_BYTES]
    );
    pass(format!(
        "wrong count, wrong scalar width, wrong struct size refused (InvalidArgument); {attr_detail}; stream still usable"
    ))
}

pub(crate) fn launch_builder_unchecked<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::MODULES, "modules and kernels");
    if B::KIND == BackendKind::Ascend {
        need!(
            env,
            Capabilities::KERNELS,
            "the simulator's kernel-binary format"
        );
    }
    let dev = &env.device;
    let m = dev.load_module(&fill_source(B::KIND)).ctx("load_module")?;
    let fill = m.function("xs_fill").ctx("function(xs_fill)")?;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let words = 64u32;
    let buf = dev.alloc(words as usize * 4).ctx("alloc")?;
    let mut l = s.launch_builder(&fill);
    l.config(LaunchConfig::for_items(words, 32))
        .arg(&buf)
        .arg(words)
        .arg(0x600D_F111u32);
    let checked = l.launch();
    // Where the backend knows the layout (host kinds, CUDA's driver layout) the checked launch
    // runs; where it cannot (ACL), it is refused and only the unsafe launch passes.
    // CUDA reports a user kernel's sizes from the driver (12.4 and later), not as kinds.
    let may_know = fill.params().is_some() || B::KIND == BackendKind::Cuda;
    let detail = match checked {
        Ok(()) if may_know => "layout known: the checked launch ran",
        Err(Error::Unsupported { .. }) if fill.params().is_none() => {
            // SAFETY: `xs_fill(pointer, u32 words, u32 value)` takes exactly these three
            // arguments, and the buffer holds `words` u32s.
            #[allow(unsafe_code)]
            unsafe { l.launch_unchecked() }.ctx("launch_unchecked")?;
            "layout unknown: checked launch refused (Unsupported), unchecked launch ran"
        }
        r => {
            return Err(format!(
                "checked launch of a user kernel (declared parameters: {:?}): {r:?}",
                fill.params()
            ))
        }
    };
    let got = read_all::<B>(&s, &buf)?;
    ensure!(
        got.chunks_exact(4)
            .all(|w| w == 0x600D_F111u32.to_le_bytes()),
        "xs_fill through the builder left words unfilled"
    );
    pass(detail)
}
