//! Interprocess events on the Ascend backend over the ACL simulator (a test double, not
//! hardware) switched to a chip without IPC (`xsimSetIpc(0)`, as `XSIM_IPC=0`): its
//! `aclrtIpcOpenEventHandle` refuses with 207000, as the runtime on such a chip, and every path
//! must end in a clear xstream error, never a crash. (The default simulated A2 has IPC events:
//! `ipc_memory.rs`.)
mod common;

use xstream_ascend::AscendEvent;
use xstream_core::{
    BackendKind, Device, Error, EventDesc, EventFlags, IpcEvent, IpcEventHandle, TranslationPolicy,
};

#[test]
fn ipc_events_are_refused_cleanly_on_the_simulated_chip() {
    if !common::in_sim_process() {
        return;
    }
    let _g = common::global_lock();
    common::setup();
    assert_eq!(common::Sim::get().set_ipc(Some(false)), 0);
    let d = common::device(0);
    // Not an INTERPROCESS event (best effort dropped the flag on this chip).
    let e = d
        .create_event(
            &EventDesc::new()
                .flags(EventFlags::INTERPROCESS)
                .policy(TranslationPolicy::BestEffort),
        )
        .unwrap();
    let err = e.export_ipc().unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    // A handle of another backend, of another device, of the wrong payload size.
    let cuda = IpcEventHandle::new(BackendKind::Cuda, 0, &[1; 64]).unwrap();
    let err = AscendEvent::open_ipc(&d, &cuda).unwrap_err();
    assert!(matches!(err, Error::WrongBackend { .. }), "{err}");
    assert!(err.to_string().contains("cuda backend"), "{err}");
    let other = IpcEventHandle::new(BackendKind::Ascend, 1, &[1; 64]).unwrap();
    assert!(matches!(
        AscendEvent::open_ipc(&d, &other),
        Err(Error::WrongDevice(_))
    ));
    let short = IpcEventHandle::new(BackendKind::Ascend, 0, &[1; 8]).unwrap();
    assert!(matches!(
        AscendEvent::open_ipc(&d, &short),
        Err(Error::InvalidArgument(_))
    ));
    // A well-formed handle: the simulated chip has no IPC events (207000).
    let ok = IpcEventHandle::new(BackendKind::Ascend, 0, &[1; 64]).unwrap();
    let err = AscendEvent::open_ipc(&d, &ok).unwrap_err();
    assert!(
        err.is_unsupported()
            && err.native().map(|n| (n.api, n.code)) == Some(("aclrtIpcOpenEventHandle", 207_000)),
        "{err}"
    );
}
