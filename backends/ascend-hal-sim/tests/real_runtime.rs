//! The driver emulation as the runtime sees it: `libascend_hal.so` opened with `dlopen` and driven
//! through its C entry points; then, when a CANN runtime built from source is at hand
//! (`XSTREAM_CANN_RUNTIME_DIR`: the folder holding `libacl_rt.so` and the other runtime libraries,
//! as `scripts/cann-runtime.sh` lays it out), the feasibility program against the real runtime.

use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::process::Command;

fn lib_dir() -> PathBuf {
    // `cargo test` builds the cdylib next to the test binary's folder (target/<profile>/deps) or
    // one level up.
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir").to_path_buf();
    if deps.join("libascend_hal.so").exists() {
        return deps;
    }
    deps.parent().expect("profile dir").to_path_buf()
}

type GetInfo = unsafe extern "C" fn(u32, i32, i32, *mut i64) -> i32;
type MemAlloc = unsafe extern "C" fn(*mut *mut c_void, u64, u64) -> i32;
type MemFree = unsafe extern "C" fn(*mut c_void) -> i32;
type Memcpy = unsafe extern "C" fn(u64, usize, u64, usize) -> i32;
type SqCqAlloc = unsafe extern "C" fn(u32, *mut c_void, *mut c_void) -> i32;
type TaskSend = unsafe extern "C" fn(u32, *mut c_void) -> i32;
type Query = unsafe extern "C" fn(u32, *mut c_void) -> i32;
type NoArgs = unsafe extern "C" fn() -> i32;
type Granularity = unsafe extern "C" fn(*const c_void, u32, *mut usize) -> i32;
type Reserve = unsafe extern "C" fn(*mut *mut c_void, usize, usize, *mut c_void, u64) -> i32;
type Create = unsafe extern "C" fn(*mut *mut c_void, usize, *const c_void, u64) -> i32;
type Map = unsafe extern "C" fn(*mut c_void, usize, usize, *mut c_void, u64) -> i32;
type SetAccess = unsafe extern "C" fn(*mut c_void, usize, *mut c_void, usize) -> i32;

#[test]
fn driver_entry_points_through_dlopen() {
    let path = lib_dir().join("libascend_hal.so");
    assert!(
        path.exists(),
        "libascend_hal.so not built at {}",
        path.display()
    );
    // SAFETY: the library is this crate's own cdylib; its initialisers have no preconditions.
    let lib = unsafe { libloading::Library::new(&path) }.expect("dlopen libascend_hal.so");
    // SAFETY: each symbol is looked up with the prototype of the driver header it stands for.
    unsafe {
        let get_info: libloading::Symbol<'_, GetInfo> = lib.get(b"halGetDeviceInfo").unwrap();
        let mut v = 0i64;
        // MODULE_TYPE_SYSTEM / INFO_TYPE_VERSION: chip byte 5 (910B).
        assert_eq!(get_info(0, 0, 1, &mut v), 0);
        assert_eq!((v >> 8) & 0xff, 5);
        // A device that does not exist, and a value with no answer.
        assert_eq!(get_info(7, 0, 1, &mut v), 3);
        assert_eq!(get_info(0, 0, 9999, &mut v), 65534);

        let alloc: libloading::Symbol<'_, MemAlloc> = lib.get(b"halMemAlloc").unwrap();
        let free: libloading::Symbol<'_, MemFree> = lib.get(b"halMemFree").unwrap();
        let memcpy: libloading::Symbol<'_, Memcpy> = lib.get(b"drvMemcpy").unwrap();
        let mut dev: *mut c_void = std::ptr::null_mut();
        assert_eq!(alloc(&mut dev, 256, 0), 0);
        assert!(!dev.is_null());

        // A normal SQ and a logic CQ bound to stream 7 (halSqCqInputInfo: 96 bytes).
        let sqcq: libloading::Symbol<'_, SqCqAlloc> = lib.get(b"halSqCqAllocate").unwrap();
        let mut input = [0u32; 24];
        let mut output = [0u32; 10];
        input[4] = 64; // sqeDepth
        assert_eq!(
            sqcq(0, input.as_mut_ptr().cast(), output.as_mut_ptr().cast()),
            0
        );
        let sq = output[0];
        input[0] = 2; // DRV_LOGIC_TYPE
        input[10] = 7; // info[0]: stream id
        assert_eq!(
            sqcq(0, input.as_mut_ptr().cast(), output.as_mut_ptr().cast()),
            0
        );

        // One SDMA entry (type 11, wr_cqe) copying host -> device, then a synchronous copy back.
        let src: Vec<u8> = (0..=255u8).collect();
        let mut sqe = [0u8; 64];
        sqe[0] = 11;
        sqe[1] = 1 << 6;
        sqe[4..6].copy_from_slice(&7u16.to_le_bytes());
        sqe[28..32].copy_from_slice(&256u32.to_le_bytes());
        sqe[32..40].copy_from_slice(&(src.as_ptr() as u64).to_le_bytes());
        sqe[40..48].copy_from_slice(&(dev as u64).to_le_bytes());
        let mut send = [0u8; 64]; // halTaskSendInfo
        send[8..12].copy_from_slice(&sq.to_le_bytes());
        send[16..24].copy_from_slice(&(sqe.as_ptr() as u64).to_le_bytes());
        send[24..28].copy_from_slice(&1u32.to_le_bytes());
        let task_send: libloading::Symbol<'_, TaskSend> = lib.get(b"halSqTaskSend").unwrap();
        assert_eq!(task_send(0, send.as_mut_ptr().cast()), 0);

        // The completion entry arrives on the logic CQ (halReportRecvInfo: 72 bytes) once the
        // SQ's worker ran the entry (the 10 s bound only guards against a hang).
        let recv: libloading::Symbol<'_, TaskSend> = lib.get(b"halCqReportRecv").unwrap();
        let mut cqes = [0u8; 32 * 4];
        let mut r = [0u8; 72];
        r[0..4].copy_from_slice(&2u32.to_le_bytes());
        r[8..12].copy_from_slice(&output[1].to_le_bytes());
        r[12..16].copy_from_slice(&10_000u32.to_le_bytes());
        r[16..24].copy_from_slice(&(cqes.as_mut_ptr() as u64).to_le_bytes());
        r[24..28].copy_from_slice(&4u32.to_le_bytes());
        assert_eq!(recv(0, r.as_mut_ptr().cast()), 0);
        assert_eq!(u32::from_le_bytes(r[28..32].try_into().unwrap()), 1);
        assert_eq!(u16::from_le_bytes([cqes[0], cqes[1]]), 7);
        let mut back = vec![0u8; 256];
        assert_eq!(memcpy(back.as_mut_ptr() as u64, 256, dev as u64, 256), 0);
        assert_eq!(back, src);

        // The SQ head moved past the entry (halSqCqQuery, DRV_SQCQ_PROP_SQ_HEAD).
        let query: libloading::Symbol<'_, Query> = lib.get(b"halSqCqQuery").unwrap();
        let mut q = [0u32; 13];
        q[2] = sq;
        q[4] = 1;
        assert_eq!(query(0, q.as_mut_ptr().cast()), 0);
        assert_eq!(q[5], 1);

        // Nothing more: a zero timeout says DRV_ERROR_WAIT_TIMEOUT.
        r[12..16].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(recv(0, r.as_mut_ptr().cast()), 16);

        // An unemulated function refuses instead of pretending.
        let hdc: libloading::Symbol<'_, NoArgs> = lib.get(b"drvHdcClientCreate").unwrap();
        assert_eq!(hdc(), 65534);

        // Virtual memory through the C entry points, with the header's struct layouts:
        // `drv_mem_prop` (side 1 = device, devid 0; 32 bytes), `drv_mem_access_desc` (read-write
        // for device 0; 20 bytes).
        let gran: libloading::Symbol<'_, Granularity> =
            lib.get(b"halMemGetAllocationGranularity").unwrap();
        let reserve: libloading::Symbol<'_, Reserve> = lib.get(b"halMemAddressReserve").unwrap();
        let create: libloading::Symbol<'_, Create> = lib.get(b"halMemCreate").unwrap();
        let map: libloading::Symbol<'_, Map> = lib.get(b"halMemMap").unwrap();
        let set_access: libloading::Symbol<'_, SetAccess> = lib.get(b"halMemSetAccess").unwrap();
        let unmap: libloading::Symbol<'_, MemFree> = lib.get(b"halMemUnmap").unwrap();
        let release: libloading::Symbol<'_, MemFree> = lib.get(b"halMemRelease").unwrap();
        let addr_free: libloading::Symbol<'_, MemFree> = lib.get(b"halMemAddressFree").unwrap();
        let prop: [u32; 8] = [1, 0, 0, 1, 0, 0, 0, 0];
        let mut g = 0usize;
        assert_eq!(gran(prop.as_ptr().cast(), 0, &mut g), 0);
        assert_eq!(g, 2 << 20);
        let mut va: *mut c_void = std::ptr::null_mut();
        assert_eq!(reserve(&mut va, 2 * g, 0, std::ptr::null_mut(), 0), 0);
        let mut h: *mut c_void = std::ptr::null_mut();
        assert_eq!(create(&mut h, g, prop.as_ptr().cast(), 0), 0);
        assert_eq!(map(va, g, 0, h, 0), 0);
        let mut desc: [u32; 5] = [3, 0, 1, 0, 0];
        assert_eq!(set_access(va, g, desc.as_mut_ptr().cast(), 1), 0);
        let words: [u8; 64] = [0x5A; 64];
        assert_eq!(memcpy(va as u64, g, words.as_ptr() as u64, 64), 0);
        let mut back = [0u8; 64];
        assert_eq!(memcpy(back.as_mut_ptr() as u64, 64, va as u64, 64), 0);
        assert_eq!(back, words);
        assert_eq!(addr_free(va), 3, "a reservation with a mapping");
        assert_eq!(unmap(va), 0);
        assert_eq!(release(h), 0);
        assert_eq!(addr_free(va), 0);

        assert_eq!(free(dev), 0);
        assert_eq!(free(dev), 3);
    }
}

fn compiler() -> Option<String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "gcc".into());
    Command::new(&cc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
        .then_some(cc)
}

/// Lays out a library folder: every runtime library from `runtime`, except its driver stub,
/// plus this crate's `libascend_hal.so`; `../data/platform_config` as libplatform expects.
fn stage(runtime: &Path, ours: &Path, stage: &Path) {
    let lib = stage.join("lib64");
    std::fs::create_dir_all(&lib).expect("stage dir");
    for e in std::fs::read_dir(runtime).expect("read runtime dir") {
        let p = e.expect("entry").path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".so") && name != "libascend_hal.so" {
            std::os::unix::fs::symlink(&p, lib.join(&name)).expect("link runtime library");
        }
    }
    std::os::unix::fs::symlink(ours, lib.join("libascend_hal.so")).expect("link emulation");
    let cfg = runtime.join("../data");
    if cfg.exists() {
        std::os::unix::fs::symlink(cfg.canonicalize().unwrap(), stage.join("data"))
            .expect("link data");
    }
}

#[test]
fn real_cann_runtime_round_trips_data() {
    let Some(dir) = std::env::var_os("XSTREAM_CANN_RUNTIME_DIR") else {
        println!(
            "SKIP: XSTREAM_CANN_RUNTIME_DIR is unset (the lib64 folder of a CANN runtime built by scripts/cann-runtime.sh)"
        );
        return;
    };
    let runtime = PathBuf::from(dir);
    assert!(
        runtime.join("libacl_rt.so").exists(),
        "XSTREAM_CANN_RUNTIME_DIR={} has no libacl_rt.so",
        runtime.display()
    );
    let Some(cc) = compiler() else {
        println!("SKIP: no C compiler (gcc or $CC) to build the feasibility program");
        return;
    };
    let ours = lib_dir().join("libascend_hal.so");
    let work = std::env::temp_dir().join(format!("xstream-cann-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    stage(&runtime, &ours, &work);
    let exe = work.join("feasibility");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("c/feasibility.c");
    let b = Command::new(&cc)
        .args(["-O1", "-Wall"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-ldl")
        .output()
        .expect("run the C compiler");
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let lib = work.join("lib64");
    let run = Command::new(&exe)
        .arg(lib.join("libacl_rt.so"))
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .expect("run the feasibility program");
    let out = String::from_utf8_lossy(&run.stdout).to_string();
    let _ = std::fs::remove_dir_all(&work);
    println!("{out}");
    assert!(
        run.status.success(),
        "feasibility failed ({:?}):\n{out}",
        run.status
    );
    assert!(out.contains("PASS: 1048576 bytes round-tripped"), "{out}");
}
