//! IPC memory and IPC events across processes on the simulator's default product (an A2/A3
//! product with both features). The test spawns this binary again as an exporter and an
//! importer (and, after the exporter exits, a late importer) and talks to them over pipes;
//! every child stops itself (a bounded read of its next command) and the parent kills any
//! child still running after its bound.

use ascendcl::codes::*;
use ascendcl::*;
use std::ffi::{c_void, CString};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::ptr::null_mut;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

const N: usize = 4096;
const ROLE: &str = "XSIM_IPC_TEST_ROLE";

fn spawn(role: &str, extra: &[(&str, String)]) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env_remove("XSIM_IPC")
        .env_remove("XSIM_PRODUCT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    for (k, v) in extra {
        c.env(k, v);
    }
    c.spawn().unwrap()
}

const BOUND: Duration = Duration::from_secs(60);

/// The child's stdout as lines, read on a thread (so that every wait is bounded).
fn lines(c: &mut Child) -> Receiver<String> {
    let out = c.stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits (bounded) for a line holding `tag`; the words after it.
fn expect(rx: &Receiver<String>, tag: &str) -> String {
    let t = Instant::now();
    loop {
        let left = BOUND.saturating_sub(t.elapsed());
        let line = match rx.recv_timeout(left) {
            Ok(l) => l,
            Err(RecvTimeoutError::Timeout) => panic!("no {tag} within {BOUND:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("child ended before {tag}"),
        };
        // libtest may have written "test child_entry ... " before the child's own words.
        if let Some(at) = line.find(tag) {
            return line[at + tag.len()..].trim().to_string();
        }
    }
}

/// Children killed when the test ends early (a failed assertion).
struct Kids(Vec<Child>);

impl Drop for Kids {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits (bounded) for child `i` to exit; whether it succeeded.
fn finish(k: &mut Kids, i: usize) -> bool {
    let t = Instant::now();
    loop {
        if let Some(s) = k.0[i].try_wait().unwrap() {
            return s.success();
        }
        if t.elapsed() > BOUND {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn memory_and_events_cross_processes_with_the_whitelist() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let mut k = Kids(vec![spawn("import", &[])]);
    let peer = k.0[0].id().to_string();
    k.0.push(spawn("export", &[("XSIM_IPC_TEST_PEER", peer)]));
    let imp_out = lines(&mut k.0[0]);
    let exp_out = lines(&mut k.0[1]);
    let handles = expect(&exp_out, "HANDLES");
    writeln!(k.0[0].stdin.as_mut().unwrap(), "{handles}").unwrap();
    assert_eq!(expect(&imp_out, "IMPORTED"), "ok");
    writeln!(k.0[1].stdin.as_mut().unwrap(), "check").unwrap();
    assert_eq!(expect(&exp_out, "EXPORTER"), "ok");
    drop(k.0[1].stdin.take());
    assert!(finish(&mut k, 1), "exporter failed");
    assert!(finish(&mut k, 0), "importer failed");
    // The exporter has exited: its key and event handle no longer open.
    k.0.push(spawn("late", &[]));
    let late_out = lines(&mut k.0[2]);
    writeln!(k.0[2].stdin.as_mut().unwrap(), "{handles}").unwrap();
    assert_eq!(expect(&late_out, "LATE"), "ok");
    assert!(finish(&mut k, 2), "late importer failed");
}

/// Tells the parent one line (flushed at once: the parent waits for it).
fn say(line: &str) {
    let mut o = std::io::stdout().lock();
    writeln!(o, "{line}").unwrap();
    o.flush().unwrap();
}

fn read_cmd() -> String {
    let mut s = String::new();
    std::io::stdin().read_line(&mut s).unwrap();
    s.trim().to_string()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn key_of(p: *mut c_void, flags: u64) -> (i32, String) {
    let mut k = [0u8; 65];
    // SAFETY: a 65-byte buffer.
    let r = unsafe { aclrtIpcMemGetExportKey(p, N, k.as_mut_ptr() as *mut _, k.len(), flags) };
    let end = k.iter().position(|&b| b == 0).unwrap_or(0);
    (r, String::from_utf8_lossy(&k[..end]).into_owned())
}

/// The children (a no-op in a normal test run).
#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    // SAFETY: the calls below pass valid pointers or NULL on purpose.
    unsafe {
        assert_eq!(aclInit(std::ptr::null()), 0);
        assert_eq!(aclrtSetDevice(0), 0);
        let mut s: *mut c_void = null_mut();
        assert_eq!(aclrtCreateStream(&mut s), 0);
        match role.as_str() {
            "export" => {
                let peer: i32 = std::env::var("XSIM_IPC_TEST_PEER")
                    .unwrap()
                    .parse()
                    .unwrap();
                let mut p: *mut c_void = null_mut();
                let mut q: *mut c_void = null_mut();
                assert_eq!(aclrtMalloc(&mut p, N, 0), 0);
                assert_eq!(aclrtMalloc(&mut q, N, 0), 0);
                // Argument checks in the runtime's order.
                let mut k = [0u8; 65];
                assert_eq!(
                    aclrtIpcMemGetExportKey(null_mut(), N, k.as_mut_ptr() as *mut _, 65, 0),
                    ACL_ERROR_INVALID_PARAM
                );
                assert_eq!(key_of(p, 2).0, ACL_ERROR_RT_PARAM_INVALID);
                assert_eq!(
                    aclrtIpcMemGetExportKey(p, 0, k.as_mut_ptr() as *mut _, 65, 0),
                    ACL_ERROR_RT_PARAM_INVALID
                );
                assert_eq!(
                    aclrtIpcMemGetExportKey(p, N, k.as_mut_ptr() as *mut _, 4, 0),
                    ACL_ERROR_RT_PARAM_INVALID,
                    "a key buffer too short"
                );
                let inner = (p as *mut u8).add(64) as *mut c_void;
                assert_eq!(key_of(inner, 0).0, ACL_ERROR_RT_PARAM_INVALID);
                let (r, key) = key_of(p, 0);
                assert_eq!(r, 0);
                let ck = CString::new(key.clone()).unwrap();
                let mut pids = [peer];
                assert_eq!(
                    aclrtIpcMemSetImportPid(ck.as_ptr(), pids.as_mut_ptr(), 0),
                    ACL_ERROR_RT_PARAM_INVALID
                );
                assert_eq!(
                    aclrtIpcMemSetImportPid(ck.as_ptr(), pids.as_mut_ptr(), 1),
                    0
                );
                // A second block whitelisted for another process only.
                let (r, key2) = key_of(q, 0);
                assert_eq!(r, 0);
                let ck2 = CString::new(key2.clone()).unwrap();
                let mut other = [1i32];
                assert_eq!(
                    aclrtIpcMemSetImportPid(ck2.as_ptr(), other.as_mut_ptr(), 1),
                    0
                );
                // An IPC event, recorded after the producer's work on the stream.
                let mut ev: *mut c_void = null_mut();
                assert_eq!(aclrtCreateEventExWithFlag(&mut ev, ACL_EVENT_IPC), 0);
                let mut h = AclrtIpcEventHandle { reserved: [0; 64] };
                assert_eq!(aclrtIpcGetEventHandle(ev, &mut h), 0);
                let mut plain: *mut c_void = null_mut();
                assert_eq!(aclrtCreateEvent(&mut plain), 0);
                assert_eq!(
                    aclrtIpcGetEventHandle(plain, &mut h),
                    ACL_ERROR_RT_PARAM_INVALID
                );
                assert_eq!(aclrtIpcGetEventHandle(ev, &mut h), 0);
                assert_eq!(xsimLaunchDelay(s, 100_000), 0);
                assert_eq!(aclrtMemsetAsync(p, N, 0x5A, N, s), 0);
                assert_eq!(aclrtRecordEvent(ev, s), 0);
                let hb = h.reserved.map(|c| c as u8);
                say(&format!("HANDLES {key} {key2} {}", hex(&hb)));
                assert_eq!(read_cmd(), "check");
                // The importer wrote 0xC3 into the first 16 bytes after its wait.
                let mut host = [0u8; N];
                assert_eq!(aclrtMemcpy(host.as_mut_ptr() as *mut _, N, p, N, 2), 0);
                assert!(host[..16].iter().all(|&b| b == 0xC3), "{:?}", &host[..16]);
                assert!(host[16..].iter().all(|&b| b == 0x5A));
                // Withdraw the export; a second close is refused.
                assert_eq!(aclrtIpcMemClose(ck.as_ptr()), 0);
                assert_eq!(aclrtIpcMemClose(ck.as_ptr()), ACL_ERROR_RT_PARAM_INVALID);
                assert_eq!(aclrtIpcMemClose(null_mut()), ACL_ERROR_INVALID_PARAM);
                say("EXPORTER ok");
                let _ = read_cmd(); // until the parent closes the pipe
                assert_eq!(aclrtFree(p), 0);
                assert_eq!(aclrtFree(q), 0);
            }
            "import" => {
                let line = read_cmd();
                let parts: Vec<&str> = line.split(' ').collect();
                let (key, key2, evh) = (parts[0], parts[1], unhex(parts[2]));
                let mut d: *mut c_void = null_mut();
                let garbage = CString::new("xsim-1-2-3").unwrap();
                assert_eq!(
                    aclrtIpcMemImportByKey(&mut d, garbage.as_ptr(), 0),
                    ACL_ERROR_RT_PARAM_INVALID
                );
                let junk = CString::new("not a key").unwrap();
                assert_eq!(
                    aclrtIpcMemImportByKey(&mut d, junk.as_ptr(), 0),
                    ACL_ERROR_RT_PARAM_INVALID
                );
                let ck = CString::new(key).unwrap();
                assert_eq!(
                    aclrtIpcMemImportByKey(&mut d, ck.as_ptr(), 2),
                    ACL_ERROR_RT_PARAM_INVALID
                );
                assert_eq!(
                    aclrtIpcMemImportByKey(null_mut(), ck.as_ptr(), 0),
                    ACL_ERROR_INVALID_PARAM
                );
                let ck2 = CString::new(key2).unwrap();
                assert_eq!(
                    aclrtIpcMemImportByKey(&mut d, ck2.as_ptr(), 0),
                    ACL_ERROR_RT_PARAM_INVALID,
                    "not on the whitelist"
                );
                assert_eq!(aclrtIpcMemImportByKey(&mut d, ck.as_ptr(), 0), 0);
                assert!(!d.is_null());
                assert_eq!(
                    aclrtFree(d),
                    ACL_ERROR_RT_PARAM_INVALID,
                    "imports are closed, not freed"
                );
                let mut h = AclrtIpcEventHandle { reserved: [0; 64] };
                for (i, b) in evh.iter().enumerate() {
                    h.reserved[i] = *b as _;
                }
                let mut bad = h;
                bad.reserved[20] ^= 0x55;
                let mut ev: *mut c_void = null_mut();
                assert_eq!(
                    aclrtIpcOpenEventHandle(bad, &mut ev),
                    ACL_ERROR_RT_PARAM_INVALID
                );
                assert_eq!(aclrtIpcOpenEventHandle(h, &mut ev), 0);
                // Wait on the producer's event without blocking the host, then read.
                assert_eq!(aclrtStreamWaitEvent(s, ev), 0);
                let mut host = [0u8; N];
                assert_eq!(
                    aclrtMemcpyAsync(host.as_mut_ptr() as *mut _, N, d, N, 2, s),
                    0
                );
                assert_eq!(aclrtSynchronizeStream(s), 0);
                assert!(host.iter().all(|&b| b == 0x5A), "{:?}", &host[..8]);
                assert_eq!(aclrtSynchronizeEvent(ev), 0);
                let mut st = -1;
                assert_eq!(aclrtQueryEventStatus(ev, &mut st), 0);
                assert_eq!(st, ACL_EVENT_RECORDED_STATUS_COMPLETE);
                assert_eq!(aclrtMemsetAsync(d, 16, 0xC3, 16, s), 0);
                assert_eq!(aclrtSynchronizeStream(s), 0);
                assert_eq!(aclrtIpcMemClose(ck.as_ptr()), 0);
                assert_eq!(aclrtDestroyEvent(ev), 0);
                say("IMPORTED ok");
            }
            "late" => {
                let line = read_cmd();
                let parts: Vec<&str> = line.split(' ').collect();
                let ck = CString::new(parts[0]).unwrap();
                let mut d: *mut c_void = null_mut();
                assert_eq!(
                    aclrtIpcMemImportByKey(&mut d, ck.as_ptr(), 0),
                    ACL_ERROR_RT_PARAM_INVALID
                );
                let mut h = AclrtIpcEventHandle { reserved: [0; 64] };
                for (i, b) in unhex(parts[2]).iter().enumerate() {
                    h.reserved[i] = *b as _;
                }
                let mut ev: *mut c_void = null_mut();
                assert_eq!(
                    aclrtIpcOpenEventHandle(h, &mut ev),
                    ACL_ERROR_RT_PARAM_INVALID
                );
                // The 910 product has IPC memory but no IPC events (RT_FEATURE_IPC_EVENT).
                assert_eq!(xsimSetProduct(c"910".as_ptr()), 0);
                assert_eq!(
                    aclrtCreateEventExWithFlag(&mut ev, ACL_EVENT_IPC),
                    ACL_ERROR_RT_FEATURE_NOT_SUPPORT
                );
                assert_eq!(
                    aclrtIpcOpenEventHandle(h, &mut ev),
                    ACL_ERROR_RT_FEATURE_NOT_SUPPORT
                );
                let mut p: *mut c_void = null_mut();
                assert_eq!(aclrtMalloc(&mut p, N, 0), 0);
                assert_eq!(key_of(p, 1).0, 0);
                assert_eq!(aclrtFree(p), 0);
                say("LATE ok");
            }
            r => panic!("unknown role {r}"),
        }
    }
}
