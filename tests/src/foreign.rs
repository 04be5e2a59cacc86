//! Conformance check of the foreign-buffer rule (docs/semantics.md, "One device per buffer"):
//! a buffer is used only on streams of its own device; every stream operation that takes a
//! buffer refuses one of another device with `WrongDevice` before anything reaches the vendor,
//! and the foreign memory is left as it was.

use xstream_core::module::{lcg_launch, KernelArg, BUILTIN_LCG};
use xstream_core::{
    Backend, Buffer, Capabilities, Device, Error, Kernel, Module, PinnedAllocDesc, ReduceKind,
    ReduceType, Reduction, Stream, WaitCondition,
};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env, Outcome};

const LEN: usize = 256;

/// A device other than the one under test, whose buffers do not belong to it: another ordinal
/// of the backend, else the isolated context the environment offers when the backend tells
/// its buffers apart from the device's.
fn foreign_device<B: Backend>(env: &Env<B>) -> Result<Option<(B::Device, String)>, String> {
    let me = env.device.info().ordinal;
    let n = B::device_count().ctx("device_count")?;
    if let Some(o) = (0..n).find(|&o| o != me) {
        return Ok(Some((
            B::open(o).ctx("open another device")?,
            format!("device {o}"),
        )));
    }
    if let Some(make) = env.isolated {
        let d = make().ctx("isolated device")?;
        let probe = d.alloc(4).ctx("alloc on the isolated device")?;
        if !probe.belongs_to(&env.device) {
            return Ok(Some((d, "an isolated context of the same device".into())));
        }
    }
    Ok(None)
}

/// Every stream operation that takes a buffer, given one of another device: each answers
/// `WrongDevice`; the foreign buffer's bytes are unchanged afterwards and the stream still
/// works.
pub(crate) fn foreign_buffers<B: Backend>(env: &Env<B>) -> CheckResult {
    let Some((other, which)) = foreign_device(env)? else {
        return Ok(Outcome::Skip(format!(
            "one {} device and no context whose buffers are foreign to it",
            B::KIND
        )));
    };
    let caps = env.device.info().capabilities;
    let s = env.device.create_stream(&nb()).ctx("create_stream")?;
    let os = other
        .create_stream(&nb())
        .ctx("create_stream on the other device")?;
    let far = other.alloc(LEN).ctx("alloc on the other device")?;
    let pattern: Vec<u8> = (0..LEN)
        .map(|i| (i as u8).wrapping_mul(13) ^ 0xa5)
        .collect();
    os.write(&far, 0, pattern.clone())
        .ctx("write the foreign buffer")?;
    os.synchronize()
        .ctx("synchronize the other device's stream")?;
    let mine = env.device.alloc(LEN).ctx("alloc")?;
    let mut host = env
        .device
        .alloc_pinned(LEN, &PinnedAllocDesc::new())
        .ctx("alloc_pinned")?;

    let mut refused = Vec::new();
    let mut expect = |op: &'static str, r: xstream_core::Result<()>| -> Result<(), String> {
        match r {
            Err(Error::WrongDevice(_)) => {
                refused.push(op);
                Ok(())
            }
            other => Err(format!(
                "{op} with a buffer of {which} gave {other:?}, expected WrongDevice"
            )),
        }
    };
    expect("memset", s.memset(&far, 0, LEN, 0))?;
    expect("memset_view", s.memset_view(&far, 1))?;
    expect("memset16", s.memset16(&far, 0x1234))?;
    expect("memset32", s.memset32(&far, 0xdead_beef))?;
    expect("write", s.write(&far, 0, vec![0; 16]))?;
    expect("write_view", s.write_view(&far, vec![0; 16]))?;
    expect("read", s.read(&far, 0, 16).map(drop))?;
    expect("read_view", s.read_view(&far).map(drop))?;
    expect("copy (foreign source)", s.copy(&far, 0, &mine, 0, 16))?;
    expect("copy (foreign destination)", s.copy(&mine, 0, &far, 0, 16))?;
    expect("copy_view", s.copy_view(&mine, &far))?;
    expect(
        "write_from_blocking",
        s.write_from_blocking(&far, &[7u32; 4]),
    )?;
    let mut back = [0u32; 4];
    expect("read_into_blocking", s.read_into_blocking(&far, &mut back))?;
    expect("copy_to_device", s.copy_to_device(&host, 0, &far, 0, 16))?;
    expect("copy_to_host", s.copy_to_host(&far, 0, &mut host, 0, 16))?;
    expect("write_from_host", s.write_from_host(&host, 0, &far))?;
    expect("read_into_host", s.read_into_host(&far, &mut host, 0))?;
    let r = Reduction::new(ReduceKind::Sum, ReduceType::F32);
    expect(
        "reduce (foreign destination)",
        s.reduce(&far, 0, &mine, 0, 16, r),
    )?;
    expect(
        "reduce (foreign source)",
        s.reduce(&mine, 0, &far, 0, 16, r),
    )?;
    expect("reduce_view", s.reduce_view(&mine, &far, r))?;
    expect(
        "launch (built-in kernel)",
        s.launch_builtin(Kernel::Lcg {
            buf: &far,
            rounds: 1,
        }),
    )?;
    // The builtin module needs the built-in kernels too (the real CANN runtime loads modules
    // but has no builtin module: KERNELS absent).
    if caps.contains(Capabilities::MODULES | Capabilities::KERNELS) {
        let m = env.device.builtin_module().ctx("builtin_module")?;
        let f = m.function(BUILTIN_LCG).ctx("function(xstream_lcg)")?;
        let (words, cfg) = lcg_launch(LEN).ctx("lcg_launch")?;
        let args = [
            KernelArg::Buffer(&far),
            KernelArg::U32(words),
            KernelArg::U32(1),
        ];
        expect("launch_kernel", s.launch_kernel(&f, &cfg, &args))?;
        let view = [
            KernelArg::View(far.view()),
            KernelArg::U32(words),
            KernelArg::U32(1),
        ];
        expect(
            "launch_kernel (view argument)",
            s.launch_kernel(&f, &cfg, &view),
        )?;
    }
    expect(
        "wait_value32",
        s.wait_value32(&far, 0, 0, WaitCondition::Geq),
    )?;
    expect(
        "wait_value64",
        s.wait_value64(&far, 0, 0, WaitCondition::Geq),
    )?;
    expect("write_value32", s.write_value32(&far, 0, 1))?;
    expect("write_value64", s.write_value64(&far, 0, 1))?;
    expect("record_use", s.record_use(&far))?;
    let doomed = other.alloc(LEN).ctx("alloc a second foreign buffer")?;
    expect("free_async", s.free_async(doomed))?;

    // Nothing reached the foreign memory, and both streams still work.
    s.synchronize().ctx("synchronize after the refusals")?;
    let now = read_all::<B>(&os, &far)?;
    ensure!(
        now == pattern,
        "the foreign buffer changed although every operation was refused"
    );
    s.write(&mine, 0, pattern.clone())
        .ctx("write after the refusals")?;
    ensure!(
        read_all::<B>(&s, &mine)? == pattern,
        "the stream does not work after the refusals"
    );
    pass(format!(
        "{} operations refused a buffer of {which} with WrongDevice; its bytes unchanged",
        refused.len()
    ))
}
