//! The demo's main job as a library (`xstream::pipeline`): on the host backend (every stage,
//! verified, with its timeline) and on the Ascend backend over the ACL runtime simulator (a
//! test double of `libascendcl.so`, not hardware), where it runs its copy stages and says
//! which stage it could not run.
#![cfg(all(feature = "host", feature = "ascend"))]

use xstream::pipeline::{CopyPath, Pipeline, PipelineConfig};
use xstream::{Backend, Device, Error, HostBackend};

#[test]
fn host_pipeline_runs_verifies_and_reports_all_stages() {
    let d = xstream::host::HostDevice::new_isolated(0);
    let cfg = PipelineConfig {
        streams: 3,
        chunks: 7,
        chunk_bytes: 8192,
        rounds: 4,
        timeline: true,
    };
    let mut p = Pipeline::<HostBackend>::new(&d, cfg).unwrap();
    for _ in 0..2 {
        let r = p.run().unwrap();
        p.verify().unwrap();
        assert_eq!(r.host_path, CopyPath::PageLocked);
        assert!(r.compute_skipped.is_none());
        assert_eq!(r.chunks.len(), 7);
        assert!(r
            .chunks
            .iter()
            .all(|t| t.start <= t.h2d && t.h2d <= t.compute && t.compute <= t.d2h));
    }
    assert!(matches!(
        Pipeline::<HostBackend>::new(
            &d,
            PipelineConfig {
                chunk_bytes: 6,
                ..cfg
            }
        ),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn ascend_sim_pipeline_runs_its_copy_stages() {
    use xstream::ascend::AscendBackend;
    // Runs in a child process started with the simulator's environment.
    if !xstream_conformance::simulator::run_in_child(2) {
        return;
    }
    xstream_conformance::simulator::setup(2);
    let _g = xstream_conformance::simulator::global_lock();
    let d = AscendBackend::open(0).expect("simulated Ascend device");
    let cfg = PipelineConfig {
        streams: 2,
        chunks: 4,
        chunk_bytes: 4096,
        rounds: 2,
        timeline: true,
    };
    let mut p = Pipeline::<AscendBackend>::new(&d, cfg).unwrap();
    let r = p.run().unwrap();
    p.verify().unwrap();
    assert_eq!(r.chunks.len(), 4);
    let kernels = d
        .info()
        .capabilities
        .contains(xstream::Capabilities::KERNELS);
    assert_eq!(r.compute_skipped.is_none(), kernels);
}
