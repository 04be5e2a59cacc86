//! The data path: the built-in compute kernel against its host reference.

use xstream_core::{lcg_reference, Backend, Capabilities, Device, Kernel, Stream};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env};

pub(crate) fn lcg_kernel<B: Backend>(env: &Env<B>) -> CheckResult {
    need!(env, Capabilities::KERNELS, "built-in kernels");
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create")?;
    let n = 1 << 16;
    let data: Vec<u8> = (0..n).map(|i| (i * 31 % 251) as u8).collect();
    let buf = dev.alloc(n).ctx("alloc")?;
    s.write(&buf, 0, data.clone()).ctx("write")?;
    s.launch(Kernel::Lcg {
        buf: &buf,
        rounds: 7,
    })
    .ctx("launch")?;
    let got = read_all::<B>(&s, &buf)?;
    let mut want = data;
    lcg_reference(&mut want, 7);
    ensure!(got == want, "device result differs from the host reference");
    pass(format!("{n} bytes, 7 rounds, identical to the reference"))
}
