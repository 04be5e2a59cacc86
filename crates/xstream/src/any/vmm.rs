//! The erased path of virtual memory (`xstream_core::vmm`): [`AnyDevice::granularity`],
//! [`AnyDevice::reserve`], [`AnyDevice::create_physical`], and the erased range and physical
//! memory, sharing physical memory with another process ([`AnyPhysicalMemory::export_shareable`],
//! [`AnyDevice::import_physical`]). Each method calls the generic one of the same name; giving a range physical memory
//! (or a device) of another backend is [`Error::WrongDevice`] naming both.

use super::{mixed, AnyBuffer, AnyDevice};
use crate::{
    BackendKind, Error, Granularity, PhysicalMemory, Result, ShareableHandle, VirtualMemory,
    VirtualRange,
};

/// Defines an erased enum over the compiled backends' `$generic<Device>`, with `kind` and
/// `From`.
macro_rules! erased_vmm {
    ($(#[$m:meta])* $name:ident, $generic:ident) => {
        $(#[$m])*
        #[derive(Debug)]
        #[non_exhaustive]
        pub enum $name {
            /// The host (CPU) backend's.
            #[cfg(feature = "host")]
            Host($generic<crate::host::HostDevice>),
            /// The CUDA backend's.
            #[cfg(feature = "cuda-backend")]
            Cuda($generic<crate::cuda::CudaDevice>),
            /// The Ascend backend's.
            #[cfg(feature = "ascend")]
            Ascend($generic<crate::ascend::AscendDevice>),
        }

        impl $name {
            kind_fn!();
        }

        #[cfg(feature = "host")]
        impl From<$generic<crate::host::HostDevice>> for $name {
            fn from(x: $generic<crate::host::HostDevice>) -> Self {
                Self::Host(x)
            }
        }

        #[cfg(feature = "cuda-backend")]
        impl From<$generic<crate::cuda::CudaDevice>> for $name {
            fn from(x: $generic<crate::cuda::CudaDevice>) -> Self {
                Self::Cuda(x)
            }
        }

        #[cfg(feature = "ascend")]
        impl From<$generic<crate::ascend::AscendDevice>> for $name {
            fn from(x: $generic<crate::ascend::AscendDevice>) -> Self {
                Self::Ascend(x)
            }
        }
    };
}

erased_vmm!(
    /// A reserved address range of any compiled backend ([`AnyDevice::reserve`]).
    AnyVirtualRange,
    VirtualRange
);
erased_vmm!(
    /// Physical memory of any compiled backend ([`AnyDevice::create_physical`]).
    AnyPhysicalMemory,
    PhysicalMemory
);

impl Clone for AnyPhysicalMemory {
    fn clone(&self) -> Self {
        each!(AnyPhysicalMemory, self, p => p.clone().into())
    }
}

impl AnyDevice {
    /// [`VirtualMemory::granularity`].
    ///
    /// # Errors
    /// As [`VirtualMemory::granularity`].
    pub fn granularity(&self) -> Result<Granularity> {
        each!(AnyDevice, self, d => d.granularity())
    }

    /// [`VirtualMemory::reserve`].
    ///
    /// # Errors
    /// As [`VirtualMemory::reserve`].
    pub fn reserve(&self, size: usize) -> Result<AnyVirtualRange> {
        each!(AnyDevice, self, d => d.reserve(size).map(AnyVirtualRange::from))
    }

    /// [`VirtualMemory::create_physical`].
    ///
    /// # Errors
    /// As [`VirtualMemory::create_physical`].
    pub fn create_physical(&self, size: usize) -> Result<AnyPhysicalMemory> {
        each!(AnyDevice, self, d => d.create_physical(size).map(AnyPhysicalMemory::from))
    }

    /// [`VirtualMemory::import_physical`] (a handle of another backend is refused by the
    /// backend's check, [`Error::WrongBackend`]).
    ///
    /// # Errors
    /// As [`VirtualMemory::import_physical`].
    pub fn import_physical(&self, handle: &ShareableHandle) -> Result<AnyPhysicalMemory> {
        each!(AnyDevice, self, d => d.import_physical(handle).map(AnyPhysicalMemory::from))
    }
}

impl AnyPhysicalMemory {
    /// [`PhysicalMemory::size`].
    pub fn size(&self) -> usize {
        each!(AnyPhysicalMemory, self, p => p.size())
    }

    /// [`PhysicalMemory::device_ordinal`].
    pub fn device_ordinal(&self) -> usize {
        each!(AnyPhysicalMemory, self, p => p.device_ordinal())
    }

    /// [`PhysicalMemory::release`].
    pub fn release(self) {
        each!(AnyPhysicalMemory, self, p => p.release())
    }

    /// [`PhysicalMemory::export_shareable`].
    ///
    /// # Errors
    /// As [`PhysicalMemory::export_shareable`].
    pub fn export_shareable(&self) -> Result<ShareableHandle> {
        each!(AnyPhysicalMemory, self, p => p.export_shareable())
    }
}

impl AnyVirtualRange {
    /// [`VirtualRange::address`].
    pub fn address(&self) -> u64 {
        each!(AnyVirtualRange, self, r => r.address())
    }

    /// [`VirtualRange::size`].
    pub fn size(&self) -> usize {
        each!(AnyVirtualRange, self, r => r.size())
    }

    /// [`VirtualRange::mappings`].
    pub fn mappings(&self) -> Vec<(usize, usize)> {
        each!(AnyVirtualRange, self, r => r.mappings())
    }

    /// [`VirtualRange::mapped_bytes`].
    pub fn mapped_bytes(&self) -> usize {
        each!(AnyVirtualRange, self, r => r.mapped_bytes())
    }

    /// [`VirtualRange::map`].
    ///
    /// # Errors
    /// As [`VirtualRange::map`]; [`Error::WrongDevice`] for memory of another backend.
    pub fn map(&self, offset: usize, phys: &AnyPhysicalMemory) -> Result<()> {
        pair!("AnyVirtualRange::map", AnyVirtualRange, self, AnyPhysicalMemory, phys, r, p => r.map(offset, p))
    }

    /// [`VirtualRange::unmap`].
    ///
    /// # Errors
    /// As [`VirtualRange::unmap`].
    pub fn unmap(&self, offset: usize) -> Result<()> {
        each!(AnyVirtualRange, self, r => r.unmap(offset))
    }

    /// [`VirtualRange::set_access`].
    ///
    /// # Errors
    /// As [`VirtualRange::set_access`]; [`Error::WrongDevice`] for a device of another
    /// backend.
    pub fn set_access(&self, offset: usize, len: usize, device: &AnyDevice) -> Result<()> {
        pair!("AnyVirtualRange::set_access", AnyVirtualRange, self, AnyDevice, device, r, d => r.set_access(offset, len, d))
    }

    /// [`VirtualRange::buffer`].
    ///
    /// # Errors
    /// As [`VirtualRange::buffer`].
    pub fn buffer(&self, offset: usize, len: usize) -> Result<AnyBuffer> {
        each!(AnyVirtualRange, self, r => r.buffer(offset, len).map(AnyBuffer::from))
    }

    /// [`VirtualRange::release`]: refused while mappings are live, the range handed back.
    ///
    /// # Errors
    /// As [`VirtualRange::release`].
    #[allow(clippy::result_large_err)]
    pub fn release(self) -> std::result::Result<(), (Self, Error)> {
        each!(AnyVirtualRange, self, r => r.release().map_err(|(r, e)| (r.into(), e)))
    }
}
