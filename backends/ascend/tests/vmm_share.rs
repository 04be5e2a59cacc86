//! Physical memory of the virtual memory API shared with another process on the ACL
//! simulator (a test double, not hardware): the exporter and the importer (this test binary
//! started again, both with the simulator's environment) write through their own mappings and
//! read each other's bytes (`xstream_conformance::vmm_share`); the runtime's PID whitelist
//! (`aclrtMemSetPidToShareableHandle`) admits only the named process. The first exchange runs
//! on the real CANN runtime too (built from source by `scripts/cann-runtime.sh`, over the
//! driver emulation `backends/ascend-hal-sim`) when `XSTREAM_CANN_RUNTIME_DIR` names its
//! libraries; SKIP otherwise. Every wait has a bound; a child past its bound is killed.

use std::io::{BufReader, Write};
use std::process::Child;

use xstream_ascend::{AscendBackend, AscendDevice};
use xstream_conformance::child::{self, finish, wait_line};
use xstream_conformance::simulator;
use xstream_conformance::vmm_share::{self, recv_hex, send_hex, BOUND};
use xstream_core::{
    Backend, BackendKind, Capabilities, Device, ShareableHandle, ShareablePayload, VirtualMemory,
};

const ROLE: &str = "XSTREAM_ASCEND_VMM_SHARE_ROLE";
const T: &str = "an_importer_process_sees_and_writes_the_exporters_bytes_on_the_simulator";
const T2: &str = "the_pid_whitelist_admits_only_the_named_process_on_the_simulator";
const T3: &str = "an_importer_process_sees_and_writes_the_exporters_bytes_on_the_real_runtime";
/// The folder of the real runtime's libraries (`scripts/cann-runtime.sh`'s `run/lib64`).
const RUNTIME_DIR: &str = "XSTREAM_CANN_RUNTIME_DIR";

fn runtime_dir() -> Option<std::ffi::OsString> {
    std::env::var_os(RUNTIME_DIR).filter(|d| !d.is_empty())
}

/// Starts `role` of `test`: with the simulator's environment, or for [`T3`] with the real
/// runtime's (its `libacl_rt.so`, its folder on the library path, one emulated device).
fn spawn(test: &str, role: &str) -> Child {
    let mut env = match runtime_dir() {
        Some(dir) if test == T3 => vec![
            (
                "XSTREAM_ACL_LIBRARY",
                std::path::Path::new(&dir).join("libacl_rt.so").into(),
            ),
            ("LD_LIBRARY_PATH", dir.clone()),
            ("XSTREAM_HAL_SIM_DEVICES", "1".into()),
            (RUNTIME_DIR, dir),
        ],
        _ => simulator::env(1),
    };
    env.push((ROLE, role.into()));
    child::spawn_test(test, env)
}

fn dev() -> AscendDevice {
    let d = AscendBackend::open(0).unwrap();
    assert!(d
        .info()
        .capabilities
        .contains(Capabilities::SHAREABLE_PHYSICAL | Capabilities::VIRTUAL_MEMORY));
    d
}

fn say(s: &str) {
    let mut o = std::io::stdout().lock();
    writeln!(o, "{s}").unwrap();
    o.flush().unwrap();
}

/// Runs `role` of `test` in a child with the simulator's environment; passes when it says
/// `done`.
fn run_role(test: &str, role: &str, done: &str) {
    let c = spawn(test, role);
    let (ok, text) = finish(c, 2 * BOUND);
    assert!(ok && text.contains(done), "{text}");
}

#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn an_importer_process_sees_and_writes_the_exporters_bytes_on_the_simulator() {
    exchange(T);
}

/// The exchange of `test`: the exporter starts the importer; each role in its own process.
fn exchange(test: &str) {
    match std::env::var(ROLE).as_deref() {
        Ok("importer") => return vmm_share::child(&dev(), &recv_hex()),
        Ok("exporter") => {
            let d = dev();
            let ex = vmm_share::export(&d);
            assert!(!ex.handle.needs_fd() && ex.handle.payload().len() == 8);
            let mut c = spawn(test, "importer");
            send_hex(&mut c, &ex.handle);
            vmm_share::parent(&d, &ex, c);
            return say("EXPORTER_DONE");
        }
        _ => {}
    }
    run_role(test, "exporter", "EXPORTER_DONE");
}

#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn an_importer_process_sees_and_writes_the_exporters_bytes_on_the_real_runtime() {
    if runtime_dir().is_none() {
        return xstream_conformance::report_skip(
            T3,
            &"XSTREAM_CANN_RUNTIME_DIR is not set (the real CANN runtime built by \
              scripts/cann-runtime.sh, over the driver emulation)",
        );
    }
    exchange(T3);
}

/// The importer of the whitelist test: refused, then (once the exporter named it) admitted.
fn listed_importer() {
    let d = dev();
    let h = recv_hex();
    let e = d.import_physical(&h).unwrap_err();
    assert!(
        e.to_string().contains("aclrtMemImportFromShareableHandle"),
        "{e}"
    );
    say("DENIED");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "GO");
    let p = d.import_physical(&h).unwrap();
    assert_eq!(p.size(), h.size());
    say("ADMITTED");
}

/// The exporter of the whitelist test: exports with PID validation on (the raw call), checks
/// the runtime's argument codes, names the importer once it was refused.
fn listed_exporter() {
    let d = dev();
    let g = d.granularity().unwrap().minimum;
    let p = d.create_physical(g).unwrap();
    let t = xstream_ascend::loader::table().unwrap();
    let export = t.aclrtMemExportToShareableHandle.unwrap();
    let set_pid = t.aclrtMemSetPidToShareableHandle.unwrap();
    let h = p.raw().handle() as usize as *mut std::ffi::c_void;
    let mut v = 0u64;
    // SAFETY: a live handle of this process and a valid out-pointer (NULL where tested).
    unsafe {
        assert_eq!(export(h, 2, 0, &mut v), 100_000, "handle type POSIX");
        assert_eq!(export(h, 0, 0, std::ptr::null_mut()), 100_000, "NULL out");
        assert_eq!(export(h, 0, 2, &mut v), 107_000, "flags 2");
        assert_eq!(export(h, 0, 0, &mut v), 0);
        assert_eq!(set_pid(v, std::ptr::null_mut(), 1), 100_000, "NULL pids");
        let mut me = 1;
        assert_eq!(set_pid(v, &mut me, 0), 100_000, "no pids");
        assert_eq!(set_pid(v ^ 1, &mut me, 1), 107_000, "not an export of ours");
    }
    let handle = ShareableHandle::new(
        BackendKind::Ascend,
        0,
        g,
        ShareablePayload {
            bytes: v.to_le_bytes().to_vec(),
            fd: None,
        },
    )
    .unwrap();
    let mut c = spawn(T2, "importer");
    send_hex(&mut c, &handle);
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let lines = wait_line(&mut out, "DENIED");
    assert!(
        lines.last().is_some_and(|l| l.contains("DENIED")),
        "{lines:?}"
    );
    let mut pid = c.id() as i32;
    // SAFETY: one readable PID.
    assert_eq!(unsafe { set_pid(v, &mut pid, 1) }, 0);
    writeln!(c.stdin.as_mut().unwrap(), "GO").unwrap();
    c.stdout = Some(out.into_inner());
    let (ok, text) = finish(c, BOUND);
    assert!(ok && text.contains("ADMITTED"), "{text}");
    say("EXPORTER_DONE");
}

#[test]
#[cfg_attr(miri, ignore = "starts child processes, which Miri cannot run")]
fn the_pid_whitelist_admits_only_the_named_process_on_the_simulator() {
    match std::env::var(ROLE).as_deref() {
        Ok("importer") => return listed_importer(),
        Ok("exporter") => return listed_exporter(),
        _ => {}
    }
    run_role(T2, "exporter", "EXPORTER_DONE");
}
