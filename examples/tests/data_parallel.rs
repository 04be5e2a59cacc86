//! The data-parallel example's logic on the host backend: one process for every rank, and one
//! thread per rank joined by unique id (the per-process path, in one process).

use xstream::collective::bootstrap::{Bootstrap, IdSource};
use xstream::{Backend, CollectiveBackend, HostBackend};
use xstream_examples::data_parallel::{run, train, Config};

#[test]
fn one_process_every_rank() {
    let cfg = Config {
        backend: "host".into(),
        ranks: Some(3),
        elems: 4099,
        steps: 2,
    };
    let r = run(&cfg).unwrap();
    assert_eq!((r.world, r.ranks_here, r.steps), (3, 3, 2));
    assert!(r.native_avg);
    assert!(r.to_string().contains("OK"));
}

#[test]
fn one_rank_per_thread_through_the_bootstrap() {
    let world = 4;
    let id = HostBackend::new_unique_id().unwrap();
    let cfg = Config {
        backend: "host".into(),
        ranks: None,
        elems: 1000,
        steps: 3,
    };
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..world)
            .map(|rank| {
                let (cfg, id) = (&cfg, id.clone());
                s.spawn(move || {
                    let b = Bootstrap::new(rank, world, 0, IdSource::Given(id));
                    let dev = HostBackend::open(b.local_rank).unwrap();
                    let comm = b.init::<HostBackend>(&dev).unwrap();
                    train::<HostBackend>(cfg, &[comm])
                })
            })
            .collect();
        for h in hs {
            let r = h.join().unwrap().unwrap();
            assert_eq!((r.world, r.ranks_here), (world, 1));
        }
    });
}

#[test]
fn bad_options_are_refused() {
    let cfg = Config {
        backend: "host".into(),
        ranks: Some(2),
        elems: 0,
        steps: 1,
    };
    assert!(run(&cfg).is_err());
    let cfg = Config {
        backend: "opencl".into(),
        ..Config::default()
    };
    assert!(run(&cfg).is_err());
}
