//! Virtual memory on Ascend ([`VirtualMemory`] for [`AscendDevice`]): not bound yet. The
//! device lacks [`Capabilities::VIRTUAL_MEMORY`](xstream_core::Capabilities::VIRTUAL_MEMORY),
//! so `xstream_core::vmm` answers every call with [`Error::Unsupported`] before these hooks
//! run; they refuse the same way should they be called directly.

use std::any::Any;
use std::sync::Arc;

use xstream_core::{BackendKind, Error, Granularity, Result, VirtualMemory};

use crate::{AscendBuffer, AscendDevice};

fn unsupported<T>() -> Result<T> {
    Err(Error::unsupported(
        BackendKind::Ascend,
        "virtual memory (aclrtReserveMemAddress and friends are not bound yet)",
    ))
}

/// No reservation exists on this backend yet.
#[derive(Debug)]
pub enum AscendReservation {}
/// No physical memory exists on this backend yet.
#[derive(Debug)]
pub enum AscendPhysical {}
/// No mapping exists on this backend yet.
#[derive(Debug)]
pub enum AscendMapping {}

impl VirtualMemory for AscendDevice {
    type Reservation = AscendReservation;
    type Physical = AscendPhysical;
    type Mapping = AscendMapping;

    fn raw_granularity(&self) -> Result<Granularity> {
        unsupported()
    }

    fn raw_reserve(&self, _size: usize, _align: usize) -> Result<(AscendReservation, u64)> {
        unsupported()
    }

    fn raw_create(&self, _size: usize) -> Result<AscendPhysical> {
        unsupported()
    }

    fn raw_map(
        &self,
        res: &AscendReservation,
        _address: u64,
        _phys: &AscendPhysical,
        _size: usize,
    ) -> Result<AscendMapping> {
        match *res {}
    }

    fn raw_set_access(
        &self,
        map: &AscendMapping,
        _address: u64,
        _size: usize,
        _peer: &AscendDevice,
    ) -> Result<()> {
        match *map {}
    }

    fn raw_buffer(
        &self,
        _address: u64,
        _len: usize,
        _keep: Arc<dyn Any + Send + Sync>,
    ) -> Result<AscendBuffer> {
        unsupported()
    }
}
