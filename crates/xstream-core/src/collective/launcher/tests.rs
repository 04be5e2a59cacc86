//! The launchers' variables through an explicit map (the process environment is not touched).

use std::collections::HashMap;

use super::*;

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let m: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| m.get(k).cloned()
}

fn placed(vars: &[(&str, &str)]) -> Placement {
    detect(env(vars)).unwrap().expect("a launcher")
}

fn refused(vars: &[(&str, &str)]) -> String {
    detect(env(vars)).unwrap_err().to_string()
}

#[test]
fn hostlists_expand() {
    let ok = |s: &str| expand_hostlist(s).unwrap();
    assert_eq!(ok("node1"), ["node1"]);
    assert_eq!(
        ok("node[01-03,07],gpu5"),
        ["node01", "node02", "node03", "node07", "gpu5"]
    );
    assert_eq!(ok("a[8-10]"), ["a8", "a9", "a10"]);
    assert_eq!(ok("n[098-100]x"), ["n098x", "n099x", "n100x"]);
    assert_eq!(ok("r[1-2]-n[1-2]"), ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]);
    assert_eq!(ok("127.0.0.[1-2]"), ["127.0.0.1", "127.0.0.2"]);
    assert_eq!(ok("x[3],y"), ["x3", "y"]);
    for bad in [
        "", "a,,b", "n[1-", "n[2-1]", "n[a-b]", "n]1[", "n[1[2]]", "n[1-2", "n[]",
    ] {
        assert!(expand_hostlist(bad).is_err(), "{bad:?} should be refused");
    }
}

#[test]
#[cfg_attr(
    miri,
    ignore = "expands names up to the size cap before refusing: minutes under Miri; runs natively in cargo test"
)]
fn hostlists_past_the_size_cap_are_refused() {
    assert!(expand_hostlist("n[0-99999999]")
        .unwrap_err()
        .contains("more than"));
    assert!(expand_hostlist("a[0-1023]b[0-1023]c[0-3]")
        .unwrap_err()
        .contains("more than"));
}

#[test]
fn torchrun_as_before() {
    let p = placed(&[("RANK", "1"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "1")]);
    assert_eq!(
        (p.launcher, p.rank, p.world_size, p.local_rank),
        (Launcher::Torchrun, 1, 2, 1)
    );
    let p = placed(&[("RANK", "3"), ("WORLD_SIZE", "4")]);
    assert_eq!((p.local_rank, p.local_rank_defaulted), (3, true));
    assert!(refused(&[("RANK", "1")]).contains("WORLD_SIZE is not"));
    assert!(refused(&[("RANK", "2"), ("WORLD_SIZE", "2")]).contains("not a rank"));
    assert!(refused(&[("RANK", "x"), ("WORLD_SIZE", "2")]).contains("RANK=\"x\""));
    assert_eq!(detect(env(&[])).unwrap(), None);
}

#[test]
fn slurm_and_its_endpoint() {
    let vars = [
        ("SLURM_PROCID", "2"),
        ("SLURM_NTASKS", "4"),
        ("SLURM_LOCALID", "0"),
        ("SLURM_JOB_ID", "4242"),
        ("SLURM_STEP_ID", "3"),
        ("SLURM_JOB_NODELIST", "gpu[07-08],cpu1"),
    ];
    let p = placed(&vars);
    assert_eq!(
        (p.launcher, p.rank, p.world_size, p.local_rank),
        (Launcher::Slurm, 2, 4, 0)
    );
    let (ep, from) = endpoint(Launcher::Slurm, env(&vars)).unwrap().unwrap();
    assert_eq!(ep.host, "gpu07");
    assert_eq!(ep.port, slurm_default_port(4242, 3));
    assert_eq!(ep.port, 10_000 + ((8 * 4242 + 3) % 20_000) as u16);
    assert!(
        from.contains("first host of SLURM_JOB_NODELIST (3 hosts)"),
        "{from}"
    );
    assert!(from.contains("derived from SLURM_JOB_ID=4242"), "{from}");
    assert_eq!(
        job_token(Launcher::Slurm, env(&vars)).unwrap().unwrap().0,
        "4242.3"
    );
    // Explicit variables win; SLURM_NODELIST is the fallback list.
    let mut over = vars.to_vec();
    over.retain(|(k, _)| *k != "SLURM_JOB_NODELIST");
    over.push(("SLURM_NODELIST", "n[5-6]"));
    let (ep, _) = endpoint(Launcher::Slurm, env(&over)).unwrap().unwrap();
    assert_eq!(ep.host, "n5");
    over.extend([
        ("MASTER_ADDR", "m"),
        ("XSTREAM_MASTER_ADDR", "x"),
        ("MASTER_PORT", "7000"),
    ]);
    let (ep, _) = endpoint(Launcher::Slurm, env(&over)).unwrap().unwrap();
    assert_eq!((ep.host.as_str(), ep.port), ("x", 7000));
    over.push(("XSTREAM_RENDEZVOUS_PORT", "7001"));
    assert_eq!(
        endpoint(Launcher::Slurm, env(&over))
            .unwrap()
            .unwrap()
            .0
            .port,
        7001
    );
    // Incomplete: not Slurm (no local id); no node list and no host: an error.
    assert_eq!(
        detect(env(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "2")])).unwrap(),
        None
    );
    let e = endpoint(Launcher::Slurm, env(&[("SLURM_JOB_ID", "1")])).unwrap_err();
    assert!(e.to_string().contains("no rank-0 host"), "{e}");
    let e = endpoint(Launcher::Slurm, env(&[("SLURM_JOB_NODELIST", "n[1-")])).unwrap_err();
    assert!(e.to_string().contains("SLURM_JOB_NODELIST"), "{e}");
    let e = endpoint(Launcher::Slurm, env(&[("SLURM_JOB_NODELIST", "n1")])).unwrap_err();
    assert!(e.to_string().contains("no rendezvous port"), "{e}");
}

#[test]
fn mpi_launchers_need_an_explicit_master() {
    let ompi = [
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "3"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        ("OMPI_MCA_ess_base_jobid", "123456"),
    ];
    let p = placed(&ompi);
    assert_eq!(
        (p.launcher, p.rank, p.world_size, p.local_rank),
        (Launcher::OpenMpi, 1, 3, 1)
    );
    let e = endpoint(Launcher::OpenMpi, env(&ompi))
        .unwrap_err()
        .to_string();
    assert!(e.contains("XSTREAM_MASTER_ADDR or MASTER_ADDR"), "{e}");
    let mut with_host = ompi.to_vec();
    with_host.push(("XSTREAM_MASTER_ADDR", "10.0.0.1"));
    let e = endpoint(Launcher::OpenMpi, env(&with_host))
        .unwrap_err()
        .to_string();
    assert!(e.contains("XSTREAM_RENDEZVOUS_PORT or MASTER_PORT"), "{e}");
    with_host.push(("MASTER_PORT", "29400"));
    let (ep, _) = endpoint(Launcher::OpenMpi, env(&with_host))
        .unwrap()
        .unwrap();
    assert_eq!((ep.host.as_str(), ep.port), ("10.0.0.1", 29400));
    assert_eq!(
        job_token(Launcher::OpenMpi, env(&ompi)).unwrap().unwrap().0,
        "123456"
    );

    let hydra = [
        ("PMI_RANK", "0"),
        ("PMI_SIZE", "2"),
        ("MPI_LOCALRANKID", "0"),
    ];
    assert_eq!(placed(&hydra).launcher, Launcher::Hydra);
    assert!(placed(&hydra).also.is_empty(), "Hydra is not PMI again");
    let pmi = placed(&[("PMI_RANK", "1"), ("PMI_SIZE", "2")]);
    assert_eq!((pmi.launcher, pmi.local_rank), (Launcher::Pmi, 1));
    let pmi = placed(&[
        ("PMI_RANK", "1"),
        ("PMI_SIZE", "2"),
        ("PMI_LOCAL_RANK", "0"),
    ]);
    assert_eq!((pmi.launcher, pmi.local_rank), (Launcher::Pmi, 0));
    // Incomplete Open MPI variables: not Open MPI.
    assert_eq!(
        detect(env(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2")
        ]))
        .unwrap(),
        None
    );
}

#[test]
fn a_conflicting_mix_names_both() {
    let e = refused(&[
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_LOCALID", "0"),
    ]);
    assert!(e.contains("torchrun (RANK=1, WORLD_SIZE=2)"), "{e}");
    assert!(e.contains("slurm (SLURM_PROCID=0, SLURM_NTASKS=2)"), "{e}");
    assert!(e.contains("XSTREAM_LAUNCHER"), "{e}");
    let e = refused(&[
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        ("PMI_RANK", "1"),
        ("PMI_SIZE", "2"),
    ]);
    assert!(
        e.contains("openmpi") && e.contains("pmi (PMI_RANK=1, PMI_SIZE=2)"),
        "{e}"
    );
    // Agreeing launchers: the first in order, the other noted.
    let p = placed(&[
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_LOCALID", "1"),
        ("PMI_RANK", "1"),
        ("PMI_SIZE", "2"),
    ]);
    assert_eq!(
        (p.launcher, p.also.clone()),
        (Launcher::Slurm, vec![Launcher::Pmi])
    );
    // torchrun inside srun: torchrun placed this process.
    let p = placed(&[
        ("RANK", "5"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_RANK", "1"),
        ("TORCHELASTIC_RUN_ID", "r"),
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "2"),
        ("SLURM_LOCALID", "0"),
    ]);
    assert_eq!(
        (p.launcher, p.rank, p.local_rank),
        (Launcher::Torchrun, 5, 1)
    );
}

#[test]
fn xstream_launcher_picks_one() {
    let mix = [
        ("RANK", "1"),
        ("WORLD_SIZE", "2"),
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "4"),
        ("SLURM_LOCALID", "0"),
    ];
    let mut pick = mix.to_vec();
    pick.push(("XSTREAM_LAUNCHER", "slurm"));
    assert_eq!(placed(&pick).world_size, 4);
    let none = [
        ("XSTREAM_LAUNCHER", "none"),
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
    ];
    assert_eq!(detect(env(&none)).unwrap(), None);
    assert!(refused(&[("XSTREAM_LAUNCHER", "lsf")]).contains("not one of"));
    let e = refused(&[
        ("XSTREAM_LAUNCHER", "openmpi"),
        ("RANK", "0"),
        ("WORLD_SIZE", "1"),
    ]);
    assert!(e.contains("OMPI_COMM_WORLD_LOCAL_RANK"), "{e}");
}

#[test]
fn job_tokens() {
    let tok = |l, vars: &[(&str, &str)]| job_token(l, env(vars)).unwrap();
    assert_eq!(tok(Launcher::Torchrun, &[]), None);
    assert_eq!(
        tok(Launcher::Torchrun, &[("TORCHELASTIC_RUN_ID", "abc")])
            .unwrap()
            .0,
        "abc"
    );
    let both = [("TORCHELASTIC_RUN_ID", "abc"), ("XSTREAM_JOB_ID", "mine")];
    assert_eq!(
        tok(Launcher::Torchrun, &both).unwrap(),
        ("mine".to_string(), "XSTREAM_JOB_ID".to_string())
    );
    assert_eq!(
        tok(Launcher::Slurm, &[("SLURM_JOB_ID", "9")]).unwrap().0,
        "9"
    );
    assert_eq!(
        tok(Launcher::OpenMpi, &[("PMIX_NAMESPACE", "prterun-x-1@1")])
            .unwrap()
            .0,
        "prterun-x-1@1"
    );
    assert_eq!(
        tok(Launcher::Hydra, &[("PMI_JOBID", "kvs_1")]).unwrap().0,
        "kvs_1"
    );
    let long = "x".repeat(MAX_JOB_TOKEN_LEN + 1);
    assert!(job_token(Launcher::Pmi, env(&[("XSTREAM_JOB_ID", &long)])).is_err());
}
