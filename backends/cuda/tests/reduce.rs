//! The built-in reduce on a CUDA GPU (the `xstream_reduce_*` kernels of the builtin PTX
//! module), against a typed reference written here. Skips (prints `SKIP: <test>: <reason>`
//! and passes) without a CUDA device.

use xstream_core::{
    Backend, Capabilities, CaptureMode, Device, Graph, ReduceKind, ReduceType, Reduction, Stream,
    StreamDesc, StreamFlags,
};
use xstream_cuda::{CudaBackend, CudaDevice};

fn device(test: &str) -> Option<CudaDevice> {
    if let Err(e) = CudaBackend::availability() {
        xstream_conformance::report_skip(test, &e);
        return None;
    }
    Some(CudaBackend::open(0).expect("CUDA is available but open(0) failed"))
}

fn nb() -> StreamDesc {
    StreamDesc::new().flags(StreamFlags::NON_BLOCKING)
}

/// Deterministic small values (sums of three stay in range for every type).
fn val(i: usize, seed: usize) -> i64 {
    ((i.wrapping_mul(2_654_435_761) ^ seed.wrapping_mul(40_503)) % 101) as i64 - 50
}

fn encode(ty: ReduceType, v: &[i64]) -> Vec<u8> {
    match ty {
        ReduceType::F32 => v
            .iter()
            .flat_map(|x| (*x as f32 * 0.5).to_le_bytes())
            .collect(),
        ReduceType::I32 => v
            .iter()
            .flat_map(|x| (*x as i32 * 7).to_le_bytes())
            .collect(),
        ReduceType::I16 => v
            .iter()
            .flat_map(|x| (*x as i16 * 3).to_le_bytes())
            .collect(),
        ReduceType::I8 => v
            .iter()
            .flat_map(|x| ((*x / 2) as i8).to_le_bytes())
            .collect(),
        // Halves of small integers and their sums are exact in both half types.
        ReduceType::F16 => v
            .iter()
            .flat_map(|x| xstream_core::half::f16::from_f32(*x as f32 * 0.5).to_le_bytes())
            .collect(),
        ReduceType::BF16 => v
            .iter()
            .flat_map(|x| xstream_core::half::bf16::from_f32(*x as f32 * 0.5).to_le_bytes())
            .collect(),
        ReduceType::I64 => v
            .iter()
            .flat_map(|x| (*x * 1_000_000_000_007).to_le_bytes())
            .collect(),
    }
}

/// The reference on the encoded values: `d[i] = kind(d[i], s[i])`, decoded to typed values.
fn reference(ty: ReduceType, kind: ReduceKind, d: &[i64], s: &[i64]) -> Vec<u8> {
    let out: Vec<i64> = d
        .iter()
        .zip(s)
        .map(|(a, b)| match kind {
            ReduceKind::Sum => a + b,
            ReduceKind::Max => *a.max(b),
            ReduceKind::Min => *a.min(b),
        })
        .collect();
    match ty {
        // Encoding scales by a positive constant, so max/min/sum commute with it (f32 halves
        // of small integers are exact); i8 halves first, so encode the halves' combination.
        ReduceType::I8 => {
            let hd: Vec<i64> = d.iter().map(|x| x / 2).collect();
            let hs: Vec<i64> = s.iter().map(|x| x / 2).collect();
            let o: Vec<i64> = hd
                .iter()
                .zip(&hs)
                .map(|(a, b)| match kind {
                    ReduceKind::Sum => a + b,
                    ReduceKind::Max => *a.max(b),
                    ReduceKind::Min => *a.min(b),
                })
                .collect();
            o.iter().flat_map(|x| (*x as i8).to_le_bytes()).collect()
        }
        _ => encode(ty, &out),
    }
}

#[test]
fn reduce_every_kind_and_type_matches_the_reference() {
    let Some(dev) = device("reduce_every_kind_and_type_matches_the_reference") else {
        return;
    };
    assert!(dev.info().capabilities.contains(Capabilities::REDUCE));
    let s = dev.create_stream(&nb()).unwrap();
    // More elements than one grid of 4096 blocks × 256 threads: the stride loop runs.
    let n = 4096 * 256 + 1000;
    for ty in ReduceType::ALL {
        let size = ty.size();
        for kind in ReduceKind::ALL {
            let d: Vec<i64> = (0..n + 3).map(|i| val(i, 1)).collect();
            let src: Vec<i64> = (0..n + 5).map(|i| val(i, 2)).collect();
            let dst = dev.alloc((n + 3) * size).unwrap();
            let sb = dev.alloc((n + 5) * size).unwrap();
            s.write(&dst, 0, encode(ty, &d)).unwrap();
            s.write(&sb, 0, encode(ty, &src)).unwrap();
            // dst from element 3, src from element 5.
            s.reduce(
                &dst,
                3 * size,
                &sb,
                5 * size,
                n * size,
                Reduction::new(kind, ty),
            )
            .unwrap();
            let rb = s.read(&dst, 0, (n + 3) * size).unwrap();
            s.synchronize().unwrap();
            let got = rb.take().unwrap();
            let mut want = encode(ty, &d[..3]);
            want.extend(reference(ty, kind, &d[3..], &src[5..5 + n]));
            assert!(got == want, "{kind:?}/{ty:?} differs from the reference");
        }
    }
}

#[test]
fn reduce_in_a_capture_runs_once_per_replay() {
    let Some(dev) = device("reduce_in_a_capture_runs_once_per_replay") else {
        return;
    };
    let s = dev.create_stream(&nb()).unwrap();
    let a = dev.alloc(4096).unwrap();
    let b = dev.alloc(4096).unwrap();
    let base: Vec<u8> = (0..1024).flat_map(|i| (i as f32).to_le_bytes()).collect();
    s.write(&a, 0, base).unwrap();
    s.write(&b, 0, 0.25f32.to_le_bytes().repeat(1024)).unwrap();
    s.synchronize().unwrap();
    s.begin_capture(CaptureMode::ThreadLocal).unwrap();
    s.reduce(
        &a,
        0,
        &b,
        0,
        4096,
        Reduction::new(ReduceKind::Sum, ReduceType::F32),
    )
    .unwrap();
    let g = s.end_capture().unwrap();
    for _ in 0..3 {
        g.replay(&s).unwrap();
    }
    let rb = s.read(&a, 0, 4096).unwrap();
    s.synchronize().unwrap();
    let want: Vec<u8> = (0..1024)
        .flat_map(|i| (i as f32 + 0.75).to_le_bytes())
        .collect();
    assert!(
        rb.take().unwrap() == want,
        "three replays are not three sums"
    );
}
