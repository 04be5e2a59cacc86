//! The built-in device work ([`Kernel`]) and the host reference of its compute kernel.

use std::time::Duration;

/// Built-in device work, so that portable code (tests, the demo, benchmarks) can put real
/// work on any backend. `Delay` and `Lcg` are launches of the builtin module's
/// [`BUILTIN_DELAY`](crate::module::BUILTIN_DELAY) and [`BUILTIN_LCG`](crate::module::BUILTIN_LCG)
/// (see [`crate::module`]) on backends with [`Capabilities::MODULES`](crate::Capabilities::MODULES);
/// `Fault`, a test facility, exists only with the `testing` feature.
#[derive(Debug)]
pub enum Kernel<'a, Buf> {
    /// Busy the stream for this long (device-side spin).
    Delay(Duration),
    /// For each little-endian `u32` word `x` of `buf`, `rounds` times: `x = x * 1664525 +
    /// 1013904223` (wrapping). Real compute whose result the host can check.
    Lcg {
        /// The buffer (its length must be a multiple of 4).
        buf: &'a Buf,
        /// Iterations per word.
        rounds: u32,
    },
    /// Random numbers into `len` bytes of `buf` from byte `offset` (see [`crate::random`]):
    /// the built-in random fill, on backends with
    /// [`Capabilities::RANDOM`](crate::Capabilities::RANDOM) (it needs no
    /// [`Capabilities::KERNELS`](crate::Capabilities::KERNELS)).
    Random {
        /// The buffer.
        buf: &'a Buf,
        /// The first byte written (a multiple of the element size, but for a mask).
        offset: usize,
        /// The bytes written (a multiple of the element size, but for a mask).
        len: usize,
        /// What to write.
        fill: crate::random::RandomFill,
    },
    /// A deliberate device fault that poisons the context (tests only: feature `testing`;
    /// capability [`Capabilities::FAULT_INJECTION`](crate::Capabilities::FAULT_INJECTION)).
    #[cfg(feature = "testing")]
    Fault,
}

impl<'a, Buf> Kernel<'a, Buf> {
    /// The same work over another buffer type (the erased path's buffers turned into a
    /// backend's): `f` maps the buffer of [`Kernel::Lcg`] and [`Kernel::Random`]; its error is
    /// returned as is.
    ///
    /// # Errors
    /// What `f` returns.
    pub fn try_map_buffer<B2, E>(
        self,
        f: impl FnOnce(&'a Buf) -> Result<&'a B2, E>,
    ) -> Result<Kernel<'a, B2>, E> {
        Ok(match self {
            Kernel::Delay(d) => Kernel::Delay(d),
            Kernel::Lcg { buf, rounds } => Kernel::Lcg {
                buf: f(buf)?,
                rounds,
            },
            Kernel::Random {
                buf,
                offset,
                len,
                fill,
            } => Kernel::Random {
                buf: f(buf)?,
                offset,
                len,
                fill,
            },
            #[cfg(feature = "testing")]
            Kernel::Fault => Kernel::Fault,
        })
    }
}

/// The host-side reference of [`Kernel::Lcg`], for checking results.
pub fn lcg_reference(data: &mut [u8], rounds: u32) {
    for w in data.chunks_exact_mut(4) {
        let mut x = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        for _ in 0..rounds {
            x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        }
        w.copy_from_slice(&x.to_le_bytes());
    }
}
