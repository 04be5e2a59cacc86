//! Stream memory operations on host buffers (the reference of `xstream_core::memop`).
//!
//! A wait re-reads the word under the buffer's lock until the condition holds, sleeping with a
//! short exponential back-off (1 µs up to 1 ms) between reads, and gives up once the device is
//! faulted (the fault is then reported by synchronize like any other). A write stores the
//! little-endian bytes under the lock.

use std::sync::Arc;
use std::time::Duration;

use xstream_core::WaitCondition;

use crate::buffer::BufInner;
use crate::worker::{Node, Queue};

/// One memory operation on a word of a host buffer.
#[derive(Debug, Clone)]
pub(crate) struct ValueOp {
    buf: Arc<BufInner>,
    offset: usize,
    /// 4 or 8.
    width: usize,
    value: u64,
    /// `Some` waits, `None` writes.
    cond: Option<WaitCondition>,
}

/// The node of a wait (`cond: Some`) or write (`None`) of a word (xstream-core checked its
/// alignment and range).
pub(crate) fn node(word: super::Span<'_>, value: u64, cond: Option<WaitCondition>) -> Node {
    Node::Value(ValueOp {
        buf: Arc::clone(&word.buffer().inner),
        offset: word.offset(),
        width: word.len(),
        value,
        cond,
    })
}

impl ValueOp {
    fn read(&self) -> u64 {
        let g = self.buf.lock();
        let mut b = [0u8; 8];
        if let Some(s) = g.get(self.offset..self.offset + self.width) {
            b[..self.width].copy_from_slice(s);
        }
        u64::from_le_bytes(b)
    }

    fn holds(&self, cond: WaitCondition) -> bool {
        let word = self.read();
        if self.width == 4 {
            cond.holds32(word as u32, self.value as u32)
        } else {
            cond.holds64(word, self.value)
        }
    }

    /// Runs the operation on `q`'s worker.
    pub(crate) fn run(&self, q: &Queue) {
        let Some(cond) = self.cond else {
            let mut g = self.buf.lock();
            if let Some(s) = g.get_mut(self.offset..self.offset + self.width) {
                s.copy_from_slice(&self.value.to_le_bytes()[..self.width]);
            }
            return;
        };
        let mut pause = Duration::from_micros(1);
        while !self.holds(cond) {
            if q.shared.fault().is_some() {
                return;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }
}
