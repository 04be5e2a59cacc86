//! `Stream::reduce` on the Ascend backend over the ACL runtime simulator (a test double): the
//! per-product rules of `aclrtReduceAsync` reach the caller as portable errors.

mod common;

use common::{global_lock, Sim};
use xstream_core::{
    Capabilities, Device, Error, ReduceKind, ReduceType, Reduction, Stream, StreamDesc,
};

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn products_without_a_kind_or_type_refuse_it_as_unsupported() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let dev = common::device(0);
    assert!(dev.info().capabilities.contains(Capabilities::REDUCE));
    let s = dev.create_stream(&StreamDesc::new()).unwrap();
    let a = dev.alloc(16).unwrap();
    let b = dev.alloc(16).unwrap();
    let sum = Reduction::new(ReduceKind::Sum, ReduceType::F32);
    for product in ["910", "310p"] {
        assert_eq!(Sim::get().set_product(Some(product)), 0);
        s.write(&a, 0, f32s(&[1.0, 2.0, 3.0, 4.0])).unwrap();
        s.write(&b, 0, f32s(&[0.5; 4])).unwrap();
        // MAX: the runtime's SUM-only rule (107000, the code kept) of kind Unsupported.
        let max = Reduction::new(ReduceKind::Max, ReduceType::F32);
        match s.reduce(&a, 0, &b, 0, 16, max) {
            Err(e) if e.is_unsupported() => {
                assert_eq!(e.native().map(|n| n.code), Some(107_000), "{e}");
                assert!(e.to_string().contains("SUM only"), "{e}");
            }
            other => panic!("{product}: max/f32 gave {other:?}"),
        }
        // i32: a type the product lacks (207000).
        let i = Reduction::new(ReduceKind::Sum, ReduceType::I32);
        let r = s.reduce(&a, 0, &b, 0, 16, i);
        assert!(
            r.as_ref().is_err_and(Error::is_unsupported),
            "{product}: sum/i32: {r:?}"
        );
        // f32 sum works everywhere.
        s.reduce(&a, 0, &b, 0, 16, sum).unwrap();
        let rb = s.read(&a, 0, 16).unwrap();
        s.synchronize().unwrap();
        assert_eq!(rb.take().unwrap(), f32s(&[1.5, 2.5, 3.5, 4.5]), "{product}");
    }
    assert_eq!(Sim::get().set_product(None), 0);
}
