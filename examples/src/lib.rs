//! # xstream examples
//!
//! Each example is a library module (its logic, which the crate's tests run on the host
//! backend) and a thin binary under `src/bin/`.
//!
//! | example | binary | what |
//! |---|---|---|
//! | [`data_parallel`] | `data-parallel-allreduce` | data-parallel training steps: per-device gradients averaged with `all_reduce` on every device it is given, ordered by events, verified |

pub mod data_parallel;
