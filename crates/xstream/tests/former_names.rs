//! The names that issue 33 (item 6) renamed still compile for one release, deprecated, and
//! name exactly the new items: `Host` in a type name is the host backend, page-locked memory of
//! any backend is "pinned" (`HostBuffer` → `PinnedBuffer`, `Device::alloc_host` →
//! `Device::alloc_pinned`, ...). The only use of the former names in the workspace.
#![cfg(feature = "host")]
#![allow(deprecated)]

use std::any::TypeId;

use xstream::any::AnyRegisteredHost;
use xstream::any::{AnyDevice, AnyHostBuffer, AnyPinnedBuffer, AnyPinnedRegistration};
use xstream::pipeline::{CopyPath, HostPath};
use xstream::{
    Backend, BackendKind, BorrowedHostRange, BorrowedPinnedRange, BoxedCallback, Device,
    HeapAllocator, HostAllocDesc, HostAllocator, HostBackend, HostBuffer, HostCallback,
    HostFlagRow, HostMemFlags, HostSpan, PinnedAllocDesc, PinnedBuffer, PinnedFlagRow, PinnedFlags,
    PinnedRegistration, PinnedSpan, RegisteredHost, TranslationPolicy,
};

fn same<A: 'static, B: 'static>() -> bool {
    TypeId::of::<A>() == TypeId::of::<B>()
}

#[test]
fn former_type_names_are_the_new_types() {
    assert!(same::<HostBuffer<HostBackend>, PinnedBuffer<HostBackend>>());
    assert!(same::<HostMemFlags, PinnedFlags>());
    assert!(same::<HostAllocDesc, PinnedAllocDesc>());
    assert!(same::<HostFlagRow, PinnedFlagRow>());
    assert!(same::<HostSpan, PinnedSpan>());
    assert!(same::<
        RegisteredHost<'static, HostBackend>,
        PinnedRegistration<'static, HostBackend>,
    >());
    assert!(same::<BorrowedHostRange, BorrowedPinnedRange>());
    assert!(same::<HostAllocator, HeapAllocator>());
    assert!(same::<HostCallback, BoxedCallback>());
    assert!(same::<AnyHostBuffer, AnyPinnedBuffer>());
    assert!(same::<
        AnyRegisteredHost<'static, 'static>,
        AnyPinnedRegistration<'static, 'static>,
    >());
    assert!(same::<HostPath, CopyPath>());
    assert!(same::<
        Box<dyn xstream::HostAllocation>,
        Box<dyn xstream::PinnedAllocation>,
    >());
    assert_eq!(xstream::hostmem::HOST_ALIGN, xstream::hostmem::PINNED_ALIGN);
}

#[test]
fn former_functions_and_tables_do_what_the_new_ones_do() {
    let dev = HostBackend::open(0).expect("host device");
    let old = dev
        .alloc_host(64, &HostAllocDesc::new().flags(HostMemFlags::PORTABLE))
        .expect("Device::alloc_host");
    assert_eq!((old.len(), old.flags()), (64, PinnedFlags::PORTABLE));
    let any = AnyDevice::from(dev);
    let erased = any
        .alloc_host(16, &PinnedAllocDesc::new())
        .expect("AnyDevice::alloc_host");
    assert_eq!((erased.kind(), erased.len()), (BackendKind::Host, 16));

    let flags = PinnedFlags::PORTABLE | PinnedFlags::WRITE_COMBINED;
    let table = xstream::host::HOST_MEM_FLAGS;
    assert_eq!(table.len(), xstream::host::HOST_PINNED_FLAGS.len());
    let (bits, eff, _) =
        xstream::translate_host_flags(BackendKind::Host, table, flags, TranslationPolicy::Strict)
            .expect("translate_host_flags");
    let (new_bits, new_eff, _) = xstream::translate_pinned_flags(
        BackendKind::Host,
        xstream::host::HOST_PINNED_FLAGS,
        flags,
        TranslationPolicy::Strict,
    )
    .expect("translate_pinned_flags");
    assert_eq!((bits, eff), (new_bits, new_eff));
    assert_eq!(bits, 1 | 4);
}
