//! The data path: the built-in compute kernel against its host reference, stream-ordered
//! allocation.

use xstream_core::{Backend, Buffer, Capabilities, Device, Kernel, Stream};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env, Gate};

pub(crate) fn lcg_kernel<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::KERNELS, "built-in kernels");
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let n = 1 << 16;
    let data: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
    let buf = dev.alloc(n).ctx("alloc")?;
    s.write(&buf, 0, data.clone()).ctx("write")?;
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: 7,
    })
    .ctx("launch")?;
    let got = read_all::<B>(&s, &buf)?;
    let mut want = data;
    crate::reference::lcg_jump(&mut want, 7);
    ensure!(got == want, "device result differs from the host reference");
    pass(format!("{n} bytes, 7 rounds, identical to the reference"))
}

/// Stream-ordered allocation: a buffer used on another stream and freed with `free_async`
/// keeps its bytes for that stream's queued work, whatever the freeing stream allocates and
/// writes next (the other stream is held by a gate, so this observes ordering, not time).
pub(crate) fn stream_ordered_alloc<B: Backend>(env: &Env<B>) -> CheckResult {
    const N: usize = 4096;
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let t = dev.create_stream(&nb()).ctx("create")?;
    let z = s.alloc_async(0).ctx("alloc_async(0)")?;
    ensure!(z.len() == 0, "alloc_async(0) gave {} bytes", z.len());
    s.free_async(z).ctx("free_async of a zero-length buffer")?;
    let x = s.alloc_async(N).ctx("alloc_async")?;
    ensure!(x.len() == N, "alloc_async gave {} bytes", x.len());
    s.memset(&x, 0, N, 7).ctx("memset")?;
    s.synchronize().ctx("synchronize")?;
    let y = dev.alloc(N).ctx("alloc")?;
    let gate = Gate::hold::<B>(&t)?;
    t.copy(&x, 0, &y, 0, N).ctx("copy on the held stream")?;
    s.free_async(x).ctx("free_async")?;
    let z = s.alloc_async(N).ctx("alloc_async after the free")?;
    s.memset(&z, 0, N, 0xEE).ctx("memset of the new buffer")?;
    // Let the freeing stream run first where it does not depend on the held one (a bounded
    // wait, not an assertion: a backend that orders the free after the held stream's work,
    // as CUDA does with an event wait, times out here and goes on).
    let _ = s.synchronize_timeout(std::time::Duration::from_millis(200));
    gate.open();
    s.synchronize().ctx("synchronize the freeing stream")?;
    t.synchronize().ctx("synchronize the held stream")?;
    ensure!(gate.released(), "the gate gave up before it was opened");
    let got = read_all::<B>(&t, &y)?;
    ensure!(
        got.iter().all(|&b| b == 7),
        "the held stream read bytes written after the free"
    );
    s.free_async(z).ctx("free_async")?;
    s.synchronize().ctx("synchronize")?;
    pass("a freed buffer kept its bytes for another stream's queued copy")
}
