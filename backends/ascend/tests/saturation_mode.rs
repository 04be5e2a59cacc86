//! The device saturation mode through the backend, over the ACL simulator (a test double, not
//! hardware): saturation at start, inf/NaN set and read back, a saturation-only product refuses
//! inf/NaN with a clear error.
mod common;

use common::{global_lock, Sim};
use xstream_ascend::SaturationMode;

#[test]
fn saturation_mode_is_read_set_and_refused_where_the_chip_lacks_it() {
    if !common::in_sim_process() {
        return;
    }
    let _g = global_lock();
    let d = common::device(0);
    assert_eq!(d.saturation_mode().unwrap(), SaturationMode::Saturation);
    d.set_saturation_mode(SaturationMode::InfNan).unwrap();
    assert_eq!(d.saturation_mode().unwrap(), SaturationMode::InfNan);
    d.set_saturation_mode(SaturationMode::Saturation).unwrap();
    assert_eq!(d.saturation_mode().unwrap(), SaturationMode::Saturation);
    // The 910 has only the saturation mode.
    assert_eq!(Sim::get().set_product(Some("910")), 0);
    let err = d.set_saturation_mode(SaturationMode::InfNan).unwrap_err();
    assert!(
        err.is_unsupported() && err.to_string().contains("aclrtSetDeviceSatMode"),
        "{err:?}"
    );
    d.set_saturation_mode(SaturationMode::Saturation).unwrap();
    assert_eq!(Sim::get().set_product(None), 0);
}
