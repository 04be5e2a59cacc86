//! The emulated device: one Ascend 910B4 and the information values the runtime reads.
//!
//! Facts from the runtime's source: the chip type is byte 1 of the hardware version
//! (`PLAT_GET_CHIP`, `pkg_inc/runtime/runtime/config.h`); chip type 5 is `CHIP_910_B_93`
//! (`core/inc/soc/soc_define.hpp`), whose tasks are built by `libruntime_v100.so`; version byte 0
//! (`RT_VER_NA`) names the SoC "Ascend910B4" (`Runtime::InitSocTypeFrom910BVersion`). Core counts
//! follow `platform_config/cann/Ascend910B4.ini` (20 AI Cores, 40 vector cores).

/// Number of emulated devices by default.
pub const DEVICE_COUNT: u32 = 1;

/// Number of emulated devices: `XSTREAM_HAL_SIM_DEVICES` (1 or 2), else [`DEVICE_COUNT`].
pub fn device_count() -> u32 {
    static N: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("XSTREAM_HAL_SIM_DEVICES")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|n| (1..=2).contains(n))
            .unwrap_or(DEVICE_COUNT)
    })
}
/// `CHIP_910_B_93` in the runtime's chip-type enumeration.
pub const CHIP_910B: i64 = 5;
/// Hardware version: arch 0, chip 5, version 0 (`RT_VER_NA` → Ascend910B4).
pub const HARDWARE_VERSION: i64 = CHIP_910B << 8;
/// The SoC name the driver reports.
pub const SOC_NAME: &str = "Ascend910B4";
/// AI Core count of the Ascend910B4 platform file.
pub const AICORE_COUNT: i64 = 20;
/// Vector core count of the Ascend910B4 platform file.
pub const VECTOR_CORE_COUNT: i64 = 40;

/// `MODULE_TYPE_SYSTEM`.
pub const MODULE_SYSTEM: i32 = 0;
/// `MODULE_TYPE_AICPU`.
pub const MODULE_AICPU: i32 = 1;
/// `MODULE_TYPE_CCPU`.
pub const MODULE_CCPU: i32 = 2;
/// `MODULE_TYPE_AICORE`.
pub const MODULE_AICORE: i32 = 4;
/// `MODULE_TYPE_TSCPU`.
pub const MODULE_TSCPU: i32 = 5;
/// `MODULE_TYPE_VECTOR_CORE`.
pub const MODULE_VECTOR_CORE: i32 = 7;
/// `MODULE_TYPE_MEMORY`.
pub const MODULE_MEMORY: i32 = 10;

/// `INFO_TYPE_ENV`.
pub const INFO_ENV: i32 = 0;
/// `INFO_TYPE_VERSION`.
pub const INFO_VERSION: i32 = 1;
/// `INFO_TYPE_MASTERID`.
pub const INFO_MASTERID: i32 = 2;
/// `INFO_TYPE_CORE_NUM`.
pub const INFO_CORE_NUM: i32 = 3;
/// `INFO_TYPE_FREQUE`.
pub const INFO_FREQUE: i32 = 4;
/// `INFO_TYPE_OS_SCHED`.
pub const INFO_OS_SCHED: i32 = 5;
/// `INFO_TYPE_IN_USED`.
pub const INFO_IN_USED: i32 = 6;
/// `INFO_TYPE_OCCUPY`.
pub const INFO_OCCUPY: i32 = 8;
/// `INFO_TYPE_ID`.
pub const INFO_ID: i32 = 9;
/// `INFO_TYPE_CORE_NUM_LEVEL`.
pub const INFO_CORE_NUM_LEVEL: i32 = 15;
/// `INFO_TYPE_FREQUE_LEVEL`.
pub const INFO_FREQUE_LEVEL: i32 = 16;
/// `INFO_TYPE_PHY_CHIP_ID`.
pub const INFO_PHY_CHIP_ID: i32 = 18;
/// `INFO_TYPE_PHY_DIE_ID`.
pub const INFO_PHY_DIE_ID: i32 = 19;
/// `INFO_TYPE_WORK_MODE`.
pub const INFO_WORK_MODE: i32 = 22;
/// `INFO_TYPE_HOST_OSC_FREQUE`.
pub const INFO_HOST_OSC_FREQUE: i32 = 24;
/// `INFO_TYPE_DEV_OSC_FREQUE`.
pub const INFO_DEV_OSC_FREQUE: i32 = 25;
/// `INFO_TYPE_ADDR_MODE` (0: independent host/device address spaces).
pub const INFO_ADDR_MODE: i32 = 30;
/// `INFO_TYPE_RUN_MACH` (0: physical machine).
pub const INFO_RUN_MACH: i32 = 31;
/// `INFO_TYPE_HD_CONNECT_TYPE` (0: PCIe).
pub const INFO_HD_CONNECT_TYPE: i32 = 40;

/// `INFO_TYPE_REAL_TIME`: the device clock (here the host's real-time clock, nanoseconds).
pub const INFO_REAL_TIME: i32 = 64;

fn realtime_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// The value of one (module, info) pair, or `None` where this emulation has no answer (the
/// driver then says `DRV_ERROR_NOT_SUPPORT`).
pub fn value(module: i32, info: i32) -> Option<i64> {
    Some(match (module, info) {
        // 3: ASIC (`npu_driver.hpp`: 0 FPGA, 1 EMU, 2 ESL, 3 ASIC).
        (MODULE_SYSTEM, INFO_ENV) => 3,
        (MODULE_SYSTEM, INFO_VERSION) => HARDWARE_VERSION,
        (MODULE_SYSTEM, INFO_MASTERID) => 0,
        // The runtime reads the task-scheduler count here ("tsNumber", valid 1..=2).
        (MODULE_SYSTEM, INFO_CORE_NUM) => 1,
        (MODULE_SYSTEM, INFO_CORE_NUM_LEVEL) => 0,
        (MODULE_SYSTEM, INFO_FREQUE_LEVEL) => 0,
        (MODULE_SYSTEM, INFO_PHY_CHIP_ID) => 0,
        (MODULE_SYSTEM, INFO_PHY_DIE_ID) => 0,
        (MODULE_SYSTEM, INFO_WORK_MODE) => 0,
        (MODULE_SYSTEM, INFO_HOST_OSC_FREQUE) => 100_000_000,
        (MODULE_SYSTEM, INFO_DEV_OSC_FREQUE) => 100_000_000,
        (MODULE_SYSTEM, INFO_ADDR_MODE) => 0,
        (MODULE_SYSTEM, INFO_RUN_MACH) => 0,
        (MODULE_SYSTEM, INFO_HD_CONNECT_TYPE) => 0,
        (MODULE_SYSTEM, INFO_REAL_TIME) => realtime_ns(),
        (MODULE_AICORE, INFO_CORE_NUM) => AICORE_COUNT,
        (MODULE_AICORE, INFO_IN_USED) => 1,
        (MODULE_AICORE, INFO_FREQUE) => 1800,
        (MODULE_AICORE, INFO_OCCUPY) => (1 << AICORE_COUNT) - 1,
        (MODULE_AICORE, INFO_FREQUE_LEVEL) => 0,
        (MODULE_VECTOR_CORE, INFO_CORE_NUM) => VECTOR_CORE_COUNT,
        (MODULE_VECTOR_CORE, INFO_IN_USED) => 1,
        (MODULE_VECTOR_CORE, INFO_FREQUE) => 1800,
        (MODULE_AICPU, INFO_CORE_NUM) => 6,
        (MODULE_AICPU, INFO_OCCUPY) => 0x3f,
        (MODULE_AICPU, INFO_OS_SCHED) => 0,
        (MODULE_AICPU, INFO_IN_USED) => 1,
        (MODULE_CCPU, INFO_CORE_NUM) => 1,
        (MODULE_CCPU, INFO_ID) => 0,
        (MODULE_CCPU, INFO_OS_SCHED) => 0,
        (MODULE_CCPU, INFO_IN_USED) => 1,
        (MODULE_TSCPU, INFO_CORE_NUM) => 1,
        (MODULE_TSCPU, INFO_IN_USED) => 1,
        (MODULE_MEMORY, _) => return None,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_version_names_a_910b() {
        // PLAT_GET_CHIP is bits 8..16; PLAT_GET_VER bits 0..8.
        assert_eq!((HARDWARE_VERSION >> 8) & 0xff, CHIP_910B);
        assert_eq!(HARDWARE_VERSION & 0xff, 0);
        assert_eq!(value(MODULE_SYSTEM, INFO_VERSION), Some(HARDWARE_VERSION));
        let ts = value(MODULE_SYSTEM, INFO_CORE_NUM).unwrap();
        assert!((1..=2).contains(&ts));
        assert_eq!(value(MODULE_SYSTEM, 9999), None);
    }
}
