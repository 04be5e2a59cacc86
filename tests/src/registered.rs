//! Conformance check of uploads and downloads of the caller's own memory
//! ([`Device::with_registered_host`]): registered in place for a scope, copied asynchronously
//! without waiting for the stream's earlier work, and handed back with every copy done.

use xstream_core::{Backend, Device, Error, Status, Stream};

use crate::{nb, pass, read_all, CheckResult, Ctx, Env, Gate};

/// An upload from a registered `Vec` enqueued behind a held stream returns while the stream is
/// still held (no host stall: shown by order, not by time); the bytes arrive once it is let
/// go; a download fills the caller's slice by the end of the scope; an empty slice and a
/// buffer of another size behave as the page-locked copies do.
pub(crate) fn registered_host_copies<B: Backend>(env: &Env<B>) -> CheckResult {
    const N: usize = 64 * 1024 + 3;
    let dev = &env.device;
    let s = dev.create_stream(&nb()).ctx("create_stream")?;
    let buf = dev.alloc(N * 4).ctx("alloc")?;
    let mut data: Vec<u32> = (0..N as u32)
        .map(|i| i.wrapping_mul(2_654_435_761))
        .collect();
    let want = data.clone();

    let gate = Gate::hold::<B>(&s)?;
    let held = dev
        .with_registered_host(&mut data, |reg| -> Result<Status, String> {
            ensure!(
                reg.len() == N * 4,
                "registered {} bytes, expected {}",
                reg.len(),
                N * 4
            );
            reg.upload(&s, 0, &buf).ctx("upload")?;
            // The upload returned although the stream is still held by the gate.
            let q = s.query().ctx("query while held")?;
            gate.open();
            Ok(q)
        })
        .ctx("with_registered_host (upload)")??;
    ensure!(
        held == Status::Pending,
        "the stream was {held:?} right after the upload: the gate should still hold it"
    );
    ensure!(!gate.gave_up(), "the gate gave up before it was opened");
    ensure!(
        read_all::<B>(&s, &buf)? == bytemuck::cast_slice::<u32, u8>(&want),
        "the device buffer does not hold the uploaded slice"
    );

    // A download into another caller slice, from a view of the buffer.
    let mut back = vec![0u32; N - 1];
    dev.with_registered_host(&mut back, |reg| {
        let v = xstream_core::BufferView::range(&buf, 4, (N - 1) * 4)?;
        reg.download(&s, v, 0)
    })
    .ctx("with_registered_host (download)")?
    .ctx("download")?;
    ensure!(
        back[..] == want[1..],
        "the downloaded slice differs from the device bytes"
    );

    // Empty: a no-op registration; every copy of it is zero-length.
    let mut none: Vec<u8> = Vec::new();
    dev.with_registered_host(&mut none, |reg| {
        ensure!(
            reg.is_empty(),
            "an empty slice registered as {} bytes",
            reg.len()
        );
        reg.upload(
            &s,
            0,
            xstream_core::BufferView::range(&buf, 0, 0).ctx("view")?,
        )
        .ctx("zero-length upload")
    })
    .ctx("with_registered_host (empty)")??;

    // A range past the registered bytes: the page-locked copies' error.
    let mut small = [0u8; 16];
    let r = dev
        .with_registered_host(&mut small, |reg| reg.upload(&s, 0, &buf))
        .ctx("with_registered_host (small)")?;
    ensure!(
        matches!(r, Err(Error::InvalidArgument(_))),
        "an upload longer than the registered slice gave {r:?}"
    );
    s.synchronize().ctx("synchronize")?;
    pass(format!(
        "{} KiB uploaded behind a held stream without waiting, downloaded into a caller slice; empty and short ranges as page-locked copies",
        N * 4 / 1024
    ))
}
