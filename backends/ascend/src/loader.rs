//! Discovery of `libascendcl.so`, the process-wide function table and `aclInit`.
//!
//! Candidates, in order: `$XSTREAM_ACL_LIBRARY` (an explicit path), then
//! `$ASCEND_HOME_PATH/lib64/libascendcl.so`, then
//! `/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so`, then the plain name
//! `libascendcl.so` (the dynamic loader's search path). The first that opens **and** has every
//! required symbol wins; a library without the ACL symbols gives [`LoadError::MissingSymbol`].
//!
//! # What is checked at load
//! The C symbols are bound by name and transmuted to the function-pointer types declared in
//! [`crate::sys`]; nothing at run time can check a prototype, so the ABI is trusted from those
//! declarations (written from the public ACL headers). What the loader does check:
//! * every **required** symbol is present ([`LoadError::MissingSymbol`] otherwise);
//! * when the runtime exports `aclrtGetVersion`, its ACL API major version is the one the
//!   declarations follow ([`LoadError::UnsupportedVersion`] otherwise); the version is kept in
//!   [`AclFns::version`] and shown in the device's `driver` string;
//! * when the runtime exports `aclsysGetVersionStr` / `aclsysGetVersionNum`
//!   ([`PACKAGE_VERSION`]), the version of the CANN `runtime` package (read by the runtime from
//!   `$ASCEND_HOME_PATH/share/info/runtime/version.info`) is kept in [`AclFns::package`], shown
//!   in the `driver` string and used by version gates (a release known to be older than a
//!   feature is refused without trying it);
//! * optional symbols are used per **capability group** ([`GROUPS`]): a group is used only
//!   when every symbol of it is present; a partly exported group counts as absent and is listed
//!   by [`group_report`], so a runtime with half an API never gets half a feature.
//!
//! The table is loaded once per process into a `OnceLock<Result<_, LoadError>>`; `aclInit` is
//! called once after it (`ACL_ERROR_REPEAT_INITIALIZE` counts as success). xstream never calls
//! `aclFinalize` from a destructor (a process-exit destructor could race with runtime threads);
//! call [`crate::AscendBackend::finalize`] explicitly if you need it.

use std::sync::OnceLock;

use xstream_core::{BackendKind, Capabilities, Error, Result};

use crate::sys::{AclFns, LoadError};

/// The environment variable naming an explicit library path.
pub const ENV_LIBRARY: &str = "XSTREAM_ACL_LIBRARY";

/// The candidate paths, in the order they are tried.
pub fn candidates() -> Vec<String> {
    let mut v = Vec::new();
    if let Ok(p) = std::env::var(ENV_LIBRARY) {
        if !p.is_empty() {
            v.push(p);
        }
    }
    if let Ok(home) = std::env::var("ASCEND_HOME_PATH") {
        if !home.is_empty() {
            v.push(format!("{home}/lib64/libascendcl.so"));
        }
    }
    cfg_if::cfg_if! {
        if #[cfg(target_os = "linux")] {
            v.push("/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so".to_string());
            v.push("libascendcl.so".to_string());
        } else {
            v.push("libascendcl.so".to_string());
        }
    }
    v
}

/// Tries `candidates` in order (no global state).
///
/// # Errors
/// [`LoadError::NotFound`] listing every place tried, or the first
/// [`LoadError::MissingSymbol`] when a library opened but is not an ACL runtime (and no later
/// candidate is).
pub fn try_load(candidates: &[String]) -> std::result::Result<AclFns, LoadError> {
    let mut tried = Vec::new();
    let mut missing = None;
    for c in candidates {
        match AclFns::open(c).and_then(|t| check_version(t).map_err(|e| (e.to_string(), e))) {
            Ok(t) => return Ok(t),
            Err((
                _,
                e @ (LoadError::MissingSymbol { .. } | LoadError::UnsupportedVersion { .. }),
            )) => {
                tried.push((c.clone(), e.to_string()));
                missing.get_or_insert(e);
            }
            Err((why, _)) => tried.push((c.clone(), why)),
        }
    }
    Err(missing.unwrap_or(LoadError::NotFound { tried }))
}

/// Converts a [`LoadError`] to xstream's error.
pub fn load_error(e: &LoadError) -> Error {
    match e {
        LoadError::MissingSymbol { library, symbol } => Error::MissingSymbol {
            library: library.clone(),
            symbol,
        },
        LoadError::NotFound { .. } | LoadError::UnsupportedVersion { .. } => Error::NotAvailable {
            backend: BackendKind::Ascend,
            reason: e.to_string(),
        },
    }
}

/// Reads the runtime's ACL API version (when it exports `aclrtGetVersion`) into the table and
/// refuses a major version other than [`consts::ACL_MAJOR_VERSION`](crate::sys::consts).
///
/// # Errors
/// [`LoadError::UnsupportedVersion`].
pub fn check_version(mut t: AclFns) -> std::result::Result<AclFns, LoadError> {
    t.version = crate::result::version::query(&t);
    t.package = crate::result::sysinfo::package_version(&t);
    for m in crate::dtype::mismatches(&t) {
        tracing::warn!(
            library = %t.library,
            dtype = m.dtype.name(),
            acl_type = m.acl_type,
            xstream = m.xstream,
            runtime = m.runtime,
            "aclDataTypeSize disagrees with xstream's element size"
        );
    }
    match t.version {
        Some(v) if v.0 != crate::sys::consts::ACL_MAJOR_VERSION => {
            Err(LoadError::UnsupportedVersion {
                library: t.library.clone(),
                found: v,
            })
        }
        _ => Ok(t),
    }
}

/// A set of optional symbols that one feature needs together.
#[derive(Debug, Clone, Copy)]
pub struct SymbolGroup {
    /// The feature, in words.
    pub name: &'static str,
    /// The device capability it gives, if any.
    pub capability: Option<Capabilities>,
    /// Every symbol it needs.
    pub symbols: &'static [&'static str],
}

/// The exception-info API: device faults are reported with their stream and task.
pub const EXCEPTION_INFO: SymbolGroup = SymbolGroup {
    name: "exception location in fault errors",
    capability: None,
    symbols: &[
        "aclrtSetExceptionInfoCallback",
        "aclrtGetTaskIdFromExceptionInfo",
        "aclrtGetStreamIdFromExceptionInfo",
        "aclrtGetThreadIdFromExceptionInfo",
    ],
};

/// The stream configuration API: streams are created through `aclrtCreateStreamV2`.
pub const STREAM_CONFIG: SymbolGroup = SymbolGroup {
    name: "stream creation through the configuration API",
    capability: None,
    symbols: &[
        "aclrtCreateStreamConfigHandle",
        "aclrtSetStreamConfigOpt",
        "aclrtDestroyStreamConfigHandle",
        "aclrtCreateStreamV2",
    ],
};

/// The kernel-binary API: modules of kernels, their functions and launches
/// ([`Capabilities::MODULES`]; [`Capabilities::KERNELS`] further needs the builtin module to
/// load, which only the simulator can).
pub const MODULES: SymbolGroup = SymbolGroup {
    name: "kernel binaries and launches",
    capability: Some(Capabilities::MODULES),
    symbols: &[
        "aclrtBinaryLoadFromData",
        "aclrtBinaryGetFunction",
        "aclrtBinaryUnLoad",
        "aclrtKernelArgsInit",
        "aclrtKernelArgsAppend",
        "aclrtKernelArgsFinalize",
        "aclrtLaunchKernelWithConfig",
    ],
};

/// The CANN package version (`aclsysGetVersionStr` / `aclsysGetVersionNum`): shown in the
/// device's `driver` string and used by version gates ([`crate::sys::PackageVersion`]).
pub const PACKAGE_VERSION: SymbolGroup = SymbolGroup {
    name: "CANN package version",
    capability: None,
    symbols: &["aclsysGetVersionStr", "aclsysGetVersionNum"],
};

/// The synchronous memset: a new buffer is zeroed with `aclrtMemset` instead of a memset on
/// the default stream and a synchronize.
pub const SYNC_MEMSET: SymbolGroup = SymbolGroup {
    name: "synchronous memset",
    capability: None,
    symbols: &["aclrtMemset"],
};

/// The device's fault detail (`aclrtGetErrorVerbose`), added to the message of a sticky error.
pub const ERROR_DETAIL: SymbolGroup = SymbolGroup {
    name: "device fault detail in fault errors",
    capability: None,
    symbols: &["aclrtGetErrorVerbose"],
};

/// The capability groups of optional symbols. A group counts only when all its symbols are
/// present.
pub const GROUPS: &[SymbolGroup] = &[
    SymbolGroup {
        name: "capture",
        capability: Some(Capabilities::CAPTURE),
        symbols: &[
            "aclmdlRICaptureBegin",
            "aclmdlRICaptureEnd",
            "aclmdlRIExecuteAsync",
            "aclmdlRIDestroy",
        ],
    },
    SymbolGroup {
        name: "stream attributes",
        capability: Some(Capabilities::ATTRIBUTES),
        symbols: &["aclrtGetStreamAttribute", "aclrtSetStreamAttribute"],
    },
    SymbolGroup {
        name: "timed synchronize",
        capability: Some(Capabilities::NATIVE_TIMED_SYNC),
        symbols: &["aclrtSynchronizeStreamWithTimeout"],
    },
    SymbolGroup {
        name: "allocator registry",
        capability: Some(Capabilities::ALLOCATOR_REGISTRY),
        symbols: &[
            "aclrtAllocatorRegister",
            "aclrtAllocatorUnregister",
            "aclrtAllocatorCreateDesc",
        ],
    },
    SymbolGroup {
        name: "stream ids",
        capability: Some(Capabilities::STREAM_IDS),
        symbols: &["aclrtStreamGetId"],
    },
    MODULES,
    SymbolGroup {
        name: "fault injection (simulator only)",
        // `Kernel::Fault` exists with the `testing` feature only.
        capability: if cfg!(feature = "testing") {
            Some(Capabilities::FAULT_INJECTION)
        } else {
            None
        },
        symbols: &["xsimLaunchFault"],
    },
    SymbolGroup {
        name: "64-bit stream memory operations",
        capability: Some(Capabilities::VALUE_OPS_64),
        symbols: &["aclrtValueWait", "aclrtValueWrite"],
    },
    EXCEPTION_INFO,
    STREAM_CONFIG,
    PACKAGE_VERSION,
    SYNC_MEMSET,
    ERROR_DETAIL,
    SymbolGroup {
        name: "peer access between devices",
        // Kept only where another device is accessible (see `AscendDevice::open`).
        capability: Some(Capabilities::PEER_COPY),
        symbols: &[
            "aclrtDeviceCanAccessPeer",
            "aclrtDeviceEnablePeerAccess",
            "aclrtDeviceDisablePeerAccess",
        ],
    },
    SymbolGroup {
        name: "host memory registration",
        capability: None,
        symbols: &["aclrtHostRegister", "aclrtHostUnregister"],
    },
    SymbolGroup {
        name: "built-in reduce",
        capability: Some(Capabilities::REDUCE),
        symbols: &["aclrtReduceAsync"],
    },
    // Kept only where the chip has the task (see `AscendDevice::open`).
    SymbolGroup {
        name: "built-in random numbers",
        capability: Some(Capabilities::RANDOM),
        symbols: &["aclrtRandomNumAsync"],
    },
    IPC_EVENT_HANDLES,
    IPC_MEMORY,
    SATURATION_MODE,
    SymbolGroup {
        name: "CANN attributes (BF16, INF_NAN capabilities)",
        capability: None,
        symbols: &["aclGetCannAttribute", "aclGetCannAttributeList"],
    },
    SymbolGroup {
        name: "device feature queries",
        capability: None,
        symbols: &["aclrtGetDeviceCapability"],
    },
    SymbolGroup {
        name: "virtual memory",
        capability: Some(Capabilities::VIRTUAL_MEMORY),
        symbols: &[
            "aclrtMemGetAllocationGranularity",
            "aclrtReserveMemAddress",
            "aclrtReleaseMemAddress",
            "aclrtMallocPhysical",
            "aclrtFreePhysical",
            "aclrtMapMem",
            "aclrtUnmapMem",
            "aclrtMemSetAccess",
        ],
    },
    SymbolGroup {
        name: "virtual memory sharing",
        // Kept only with VIRTUAL_MEMORY (see `AscendDevice::open`).
        capability: Some(Capabilities::SHAREABLE_PHYSICAL),
        symbols: &[
            "aclrtMemExportToShareableHandle",
            "aclrtMemImportFromShareableHandle",
        ],
    },
];

/// The device saturation mode ([`AscendDevice::saturation_mode`](crate::AscendDevice::saturation_mode)):
/// whether floating-point overflow saturates or gives inf/NaN.
pub const SATURATION_MODE: SymbolGroup = SymbolGroup {
    name: "device saturation mode",
    capability: None,
    symbols: &["aclrtGetDeviceSatMode", "aclrtSetDeviceSatMode"],
};

/// Interprocess memory: [`IpcBuffer`](xstream_core::IpcBuffer) through the export-key calls
/// (whether the product has IPC memory shows when a buffer is exported: 207000 otherwise).
pub const IPC_MEMORY: SymbolGroup = SymbolGroup {
    name: "interprocess memory",
    capability: None,
    symbols: &[
        "aclrtIpcMemGetExportKey",
        "aclrtIpcMemSetImportPid",
        "aclrtIpcMemImportByKey",
        "aclrtIpcMemClose",
    ],
};

/// Interprocess event handles: [`IpcEvent`](xstream_core::IpcEvent) on events created with
/// `INTERPROCESS` (whether the chip has IPC events at all is the `INTERPROCESS_EVENTS`
/// capability, probed when the device opens).
pub const IPC_EVENT_HANDLES: SymbolGroup = SymbolGroup {
    name: "interprocess event handles",
    capability: None,
    symbols: &["aclrtIpcGetEventHandle", "aclrtIpcOpenEventHandle"],
};

/// How much of a group a table has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupState {
    /// Every symbol: the feature is used.
    Complete,
    /// None: the feature is off.
    Absent,
    /// Some but not all: the feature is off; the missing names.
    Partial(Vec<&'static str>),
}

/// The state of group `g` in `t`.
pub fn group_state(t: &AclFns, g: &SymbolGroup) -> GroupState {
    let present = t.present_optional();
    let missing: Vec<&'static str> = g
        .symbols
        .iter()
        .copied()
        .filter(|s| !present.contains(s))
        .collect();
    if missing.is_empty() {
        GroupState::Complete
    } else if missing.len() == g.symbols.len() {
        GroupState::Absent
    } else {
        GroupState::Partial(missing)
    }
}

/// Whether `t` has every symbol of `g`.
pub fn has_group(t: &AclFns, g: &SymbolGroup) -> bool {
    group_state(t, g) == GroupState::Complete
}

/// The capabilities of the complete groups of `t`.
pub fn symbol_capabilities(t: &AclFns) -> Capabilities {
    GROUPS
        .iter()
        .filter(|g| has_group(t, g))
        .filter_map(|g| g.capability)
        .fold(Capabilities::empty(), |a, c| a | c)
}

/// One line per group: `name: complete | absent | partial (missing a, b) -> off`.
pub fn group_report(t: &AclFns) -> Vec<String> {
    GROUPS
        .iter()
        .map(|g| match group_state(t, g) {
            GroupState::Complete => format!("{}: complete", g.name),
            GroupState::Absent => format!("{}: absent", g.name),
            GroupState::Partial(m) => {
                format!("{}: partial (missing {}) -> off", g.name, m.join(", "))
            }
        })
        .collect()
}

/// The process-wide table (loaded on first use, never panics).
///
/// # Errors
/// As [`try_load`], converted.
pub fn table() -> Result<&'static AclFns> {
    static T: OnceLock<std::result::Result<AclFns, LoadError>> = OnceLock::new();
    T.get_or_init(|| try_load(&candidates()))
        .as_ref()
        .map_err(load_error)
}

/// The table after a successful `aclInit` (called once per process).
///
/// # Errors
/// Load errors; `aclInit` failures.
pub fn acl() -> Result<&'static AclFns> {
    static INIT: OnceLock<std::result::Result<(), Error>> = OnceLock::new();
    let t = table()?;
    INIT.get_or_init(|| {
        crate::result::init(t)?;
        crate::result::exception::install(t)
    })
    .clone()?;
    Ok(t)
}

#[cfg(test)]
#[allow(unsafe_code)]
mod tests {
    use super::*;
    use std::ffi::{c_void, CStr};

    extern "C" fn dummy() {}

    #[test]
    fn fake_resolver_required_and_optional() {
        let addr = dummy as *const () as *mut c_void;
        // Everything but aclrtProcessReport: a required symbol is missing.
        // SAFETY: the table is never called; only presence is checked.
        let r = unsafe {
            AclFns::load_with("fake", |n: &CStr| {
                if n == c"aclrtProcessReport" {
                    std::ptr::null_mut()
                } else {
                    addr
                }
            })
        };
        assert_eq!(
            r.err(),
            Some(LoadError::MissingSymbol {
                library: "fake".into(),
                symbol: "aclrtProcessReport"
            })
        );
        // Only the required symbols: optional ones are None and reported as absent.
        // SAFETY: as above.
        let t = unsafe {
            AclFns::load_with("fake", |n: &CStr| {
                if AclFns::REQUIRED.contains(&n) {
                    addr
                } else {
                    std::ptr::null_mut()
                }
            })
        }
        .unwrap();
        assert!(t.aclrtCreateStreamWithConfig.is_none());
        assert!(t.aclrtBinaryLoadFromData.is_none());
        assert!(t.present_optional().is_empty());
    }

    #[test]
    fn partial_group_is_off_and_reported() {
        let addr = dummy as *const () as *mut c_void;
        // Required symbols plus only half of the value-operation group.
        // SAFETY: the table is never called; only presence is checked.
        let t = unsafe {
            AclFns::load_with("fake", |n: &CStr| {
                if AclFns::REQUIRED.contains(&n) || n == c"aclrtValueWait" {
                    addr
                } else {
                    std::ptr::null_mut()
                }
            })
        }
        .unwrap();
        let g = GROUPS
            .iter()
            .find(|g| g.capability == Some(Capabilities::VALUE_OPS_64))
            .unwrap();
        assert_eq!(
            group_state(&t, g),
            GroupState::Partial(vec!["aclrtValueWrite"])
        );
        assert!(!symbol_capabilities(&t).contains(Capabilities::VALUE_OPS_64));
        assert!(!has_group(&t, &STREAM_CONFIG));
        assert!(group_report(&t)
            .iter()
            .any(|l| l.contains("partial (missing aclrtValueWrite) -> off")));
        // No aclrtGetVersion: no version, and the table is accepted.
        assert_eq!(check_version(t).unwrap().version, None);
    }

    #[test]
    fn modules_need_every_kernel_symbol() {
        let addr = dummy as *const () as *mut c_void;
        let with = |skip: Option<&CStr>| {
            // SAFETY: the table is never called; only presence is checked.
            unsafe {
                AclFns::load_with("fake", |n: &CStr| {
                    let module = MODULES.symbols.iter().any(|m| m.as_bytes() == n.to_bytes());
                    if AclFns::REQUIRED.contains(&n) || (module && Some(n) != skip) {
                        addr
                    } else {
                        std::ptr::null_mut()
                    }
                })
            }
            .unwrap()
        };
        assert!(symbol_capabilities(&with(None)).contains(Capabilities::MODULES));
        let t = with(Some(c"aclrtKernelArgsFinalize"));
        assert_eq!(
            group_state(&t, &MODULES),
            GroupState::Partial(vec!["aclrtKernelArgsFinalize"])
        );
        assert!(!symbol_capabilities(&t).contains(Capabilities::MODULES));
    }

    #[test]
    fn every_group_symbol_is_in_the_table() {
        let names: Vec<&str> = AclFns::OPTIONAL
            .iter()
            .map(|c| c.to_str().unwrap())
            .collect();
        for g in GROUPS {
            for s in g.symbols {
                assert!(
                    names.contains(s),
                    "{s} of group {} is not an optional field",
                    g.name
                );
            }
        }
    }

    #[test]
    fn not_found_lists_every_place() {
        let c = vec![
            "/nonexistent/a/libascendcl.so".to_string(),
            "/nonexistent/b.so".to_string(),
        ];
        let e = try_load(&c).err().unwrap();
        let s = e.to_string();
        assert!(
            s.contains("/nonexistent/a/libascendcl.so") && s.contains("/nonexistent/b.so"),
            "{s}"
        );
        assert!(matches!(load_error(&e), Error::NotAvailable { .. }));
    }

    #[test]
    fn candidate_order() {
        let c = candidates();
        assert_eq!(c.last().map(String::as_str), Some("libascendcl.so"));
    }
}
