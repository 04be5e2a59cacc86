//! Device facts a runtime sizes caches and picks kernels by: the chip, its compute units, its
//! memory, and its identity (UUID, PCI bus id). The static ones live in
//! [`DeviceInfo`](crate::DeviceInfo) (`None` where the vendor has no such fact); free memory
//! changes, so it is a call: [`Device::memory_info`](crate::Device::memory_info).
//!
//! | fact | CUDA | Ascend (ACL) | host |
//! |---|---|---|---|
//! | `chip` | `sm_<major><minor>` | `aclrtGetSocName` | the CPU architecture (`std::env::consts::ARCH`) |
//! | `compute_capability` | `cuDeviceGetAttribute` (major, minor) | `None` | `None` |
//! | `compute_units` | multiprocessors | AI Cores (`aclrtGetDeviceInfo` `ACL_DEV_ATTR_AICORE_CORE_NUM`, else the cube cores of `aclrtGetResInCurrentThread`) | logical CPUs (`std::thread::available_parallelism`) |
//! | `total_memory` | `cuDeviceTotalMem` | `aclrtGetMemInfo` (HBM, else DDR) | `MemTotal` of `/proc/meminfo` |
//! | free memory | `cuMemGetInfo` | `aclrtGetMemInfo` | `MemAvailable` of `/proc/meminfo` |
//! | `uuid` | `cuDeviceGetUuid` | `aclrtDeviceGetUuid` | `None` |
//! | `pci_bus_id` | `cuDeviceGetPCIBusId` | `aclrtDeviceGetPCIBusId` | `None` |

use std::fmt;

/// Free and total memory of a device, in bytes, at the time of the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Bytes free now.
    pub free: u64,
    /// Bytes in all.
    pub total: u64,
}

/// A 16-byte device UUID, shown in the vendors' form (`8-4-4-4-12` hexadecimal digits).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DeviceUuid(pub [u8; 16]);

impl fmt::Display for DeviceUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for DeviceUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceUuid({self})")
    }
}

/// `MemTotal` and `MemAvailable` of a `/proc/meminfo` text, in bytes (the file says kB).
pub fn parse_meminfo(text: &str) -> Option<MemoryInfo> {
    let field = |name: &str| {
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            let kb: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
            kb.checked_mul(1024)
        })
    };
    Some(MemoryInfo {
        total: field("MemTotal")?,
        free: field("MemAvailable").or_else(|| field("MemFree"))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_prints_in_groups() {
        let u = DeviceUuid([
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0, 1, 2, 3, 4, 5, 6, 7,
        ]);
        assert_eq!(u.to_string(), "12345678-9abc-def0-0001-020304050607");
    }

    #[test]
    fn meminfo_parses_total_and_available() {
        let t = "MemTotal:       16000 kB\nMemFree:     100 kB\nMemAvailable:    8000 kB\n";
        assert_eq!(
            parse_meminfo(t),
            Some(MemoryInfo {
                free: 8000 * 1024,
                total: 16000 * 1024
            })
        );
        assert_eq!(
            parse_meminfo("MemTotal: 4 kB\nMemFree: 2 kB\n").map(|m| m.free),
            Some(2048)
        );
        assert_eq!(parse_meminfo("nothing"), None);
    }
}
