//! Device facts: consistent values (free ≤ total, counts above zero where reported) and a
//! stable identity across two opens of one device.

use xstream_core::{Backend, Device, Error, Stream};

use crate::{pass, CheckResult, Ctx, Env};

pub(crate) fn device_info_consistent<B: Backend>(env: &Env<B>) -> CheckResult {
    let info = env.device.info();
    let mut said = Vec::new();
    if let Some(n) = info.compute_units {
        ensure!(n > 0, "compute_units is Some(0)");
        said.push(format!("{n} compute units"));
    }
    if let Some((major, minor)) = info.compute_capability {
        ensure!(major >= 1, "compute capability {major}.{minor}");
        said.push(format!("compute capability {major}.{minor}"));
    }
    // Numerics: on CUDA bfloat16 follows the compute capability (8.0 and later).
    let (bf16, infnan) = (
        info.capabilities.contains(xstream_core::Capabilities::BF16),
        info.capabilities
            .contains(xstream_core::Capabilities::INF_NAN),
    );
    if let Some((major, minor)) = info.compute_capability {
        ensure!(
            bf16 == (major >= 8),
            "BF16 is {bf16} on compute capability {major}.{minor}"
        );
    }
    said.push(format!("bf16 {bf16}, inf/NaN {infnan}"));
    if let Some(c) = &info.chip {
        ensure!(!c.trim().is_empty(), "chip is Some(\"\")");
        said.push(format!("chip {c}"));
    }
    if let Some(t) = info.total_memory {
        ensure!(t > 0, "total_memory is Some(0)");
    }
    match env.device.memory_info() {
        Ok(m) => {
            ensure!(m.total > 0, "memory_info: total 0");
            ensure!(
                m.free <= m.total,
                "memory_info: free {} above total {}",
                m.free,
                m.total
            );
            if let Some(t) = info.total_memory {
                ensure!(
                    m.total <= t,
                    "memory_info total {} above the device's total_memory {t}",
                    m.total
                );
            }
            said.push(format!("{} of {} MiB free", m.free >> 20, m.total >> 20));
        }
        Err(Error::Unsupported { .. }) => said.push("free memory unsupported".into()),
        Err(e) => return Err(format!("memory_info: {e}")),
    }
    let again = B::open(info.ordinal).ctx("second open")?;
    let (a, b) = (info, again.info());
    ensure!(
        a.uuid == b.uuid,
        "UUID differs across opens: {:?} vs {:?}",
        a.uuid,
        b.uuid
    );
    ensure!(
        a.pci_bus_id == b.pci_bus_id,
        "PCI bus id differs across opens: {:?} vs {:?}",
        a.pci_bus_id,
        b.pci_bus_id
    );
    ensure!(
        (a.chip.clone(), a.compute_units, a.total_memory)
            == (b.chip.clone(), b.compute_units, b.total_memory),
        "static facts differ across opens"
    );
    if let Some(u) = a.uuid {
        said.push(format!("UUID {u} stable"));
    }
    if let Some(p) = &a.pci_bus_id {
        said.push(format!("PCI {p}"));
    }
    // Every allocation starts on the documented base alignment.
    let align = info.base_alignment;
    ensure!(
        align.is_power_of_two() && align >= 16,
        "base_alignment {align} is not a power of two of at least 16"
    );
    let s = env
        .device
        .create_stream(&crate::nb())
        .ctx("create_stream")?;
    let mut bufs = Vec::new();
    for len in [1usize, 3, 100, 513, 4096, 1 << 20] {
        bufs.push(env.device.alloc(len).ctx("alloc")?);
        bufs.push(s.alloc_async(len).ctx("alloc_async")?);
    }
    for b in &bufs {
        let a = xstream_core::Buffer::device_address(b);
        ensure!(
            a % align as u64 == 0,
            "a {}-byte buffer at {a:#x} is not {align}-byte aligned",
            xstream_core::Buffer::len(b)
        );
    }
    s.synchronize().ctx("synchronize")?;
    said.push(format!("{} buffers {align}-byte aligned", bufs.len()));
    pass(said.join(", "))
}
