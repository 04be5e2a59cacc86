//! A runtime written on the type-erased path (`xstream::any`): its structs hold `AnyDevice`,
//! `AnyStream`, `AnyEvent` and `AnyBuffer`, with no `B: Backend` parameter anywhere, and the
//! backend is chosen at run time (host, CUDA, or Ascend: on this repository's machines the ACL
//! runtime simulator, a test double).
//!
//! Two tensors are uploaded on two streams; a third stream waits for both ready events (on the
//! device), gathers them into one tensor and overwrites a header; where the backend captures,
//! the header write is captured into a graph and replayed. The result is read back and checked
//! against a host reference. Last, the program shows that objects of two backends do not mix:
//! an event of the chosen backend recorded on a host stream is a clear error.
//!
//! ```sh
//! cargo run -p xstream-examples --bin erased_runtime -- --backend host
//! ```

use std::cell::Cell;
use std::process::ExitCode;

use xstream::any::{AnyBuffer, AnyDevice, AnyEvent, AnyStream};
use xstream::{
    BackendKind, Capabilities, CaptureMode, Error, EventDesc, EventFlags, Result, StreamDesc,
    StreamFlags,
};

/// Bytes per input tensor.
const N: usize = 4096;
/// The header written over the start of the gathered tensor.
const HEADER: usize = 64;

/// A device tensor and the event that marks its contents ready.
struct Tensor {
    buf: AnyBuffer,
    ready: AnyEvent,
}

/// The runtime: one device of whatever backend, a few streams handed out in turn.
struct Runtime {
    dev: AnyDevice,
    streams: Vec<AnyStream>,
    next: Cell<usize>,
}

impl Runtime {
    fn new(kind: BackendKind) -> Result<Self> {
        let dev = AnyDevice::open(kind, 0)?;
        let desc = StreamDesc::new().flags(StreamFlags::NON_BLOCKING);
        let streams = (0..3)
            .map(|_| dev.create_stream(&desc))
            .collect::<Result<_>>()?;
        Ok(Self {
            dev,
            streams,
            next: Cell::new(0),
        })
    }

    fn stream(&self) -> &AnyStream {
        let i = self.next.get();
        self.next.set((i + 1) % self.streams.len());
        &self.streams[i]
    }

    fn ready_event(&self) -> Result<AnyEvent> {
        self.dev
            .create_event(&EventDesc::new().flags(EventFlags::DISABLE_TIMING))
    }

    /// Uploads `data` on the next stream.
    fn upload(&self, data: Vec<u8>) -> Result<Tensor> {
        let s = self.stream();
        let buf = self.dev.alloc(data.len())?;
        s.write(&buf, 0, data)?;
        let ready = self.ready_event()?;
        ready.record(s)?;
        Ok(Tensor { buf, ready })
    }

    /// `a` then `b` in one tensor, with `HEADER` bytes of `0xff` over its start.
    fn gather(&self, a: &Tensor, b: &Tensor) -> Result<Tensor> {
        let s = self.stream();
        s.wait_event(&a.ready)?;
        s.wait_event(&b.ready)?;
        let buf = self.dev.alloc(a.buf.len() + b.buf.len())?;
        s.copy(&a.buf, 0, &buf, 0, a.buf.len())?;
        s.copy(&b.buf, 0, &buf, a.buf.len(), b.buf.len())?;
        s.memset(&buf, 0, HEADER, 0xff)?;
        let ready = self.ready_event()?;
        ready.record(s)?;
        Ok(Tensor { buf, ready })
    }

    /// Where the backend captures: the header write `[HEADER, 2 * HEADER)` as a graph,
    /// replayed `times` times after `t` is ready. Returns whether it ran.
    fn replay_header(&self, t: &Tensor, times: usize) -> Result<bool> {
        if !self.dev.info().capabilities.contains(Capabilities::CAPTURE) {
            return Ok(false);
        }
        let s = self.stream();
        s.wait_event(&t.ready)?;
        let c = self.dev.create_stream(&StreamDesc::new())?;
        c.begin_capture(CaptureMode::Global)?;
        c.memset(&t.buf, HEADER, HEADER, 0x11)?;
        let g = c.end_capture()?;
        for _ in 0..times {
            g.replay(s)?;
        }
        t.ready.record(s)?;
        Ok(true)
    }

    fn download(&self, t: &Tensor) -> Result<Vec<u8>> {
        let s = self.stream();
        s.wait_event(&t.ready)?;
        let r = s.read(&t.buf, 0, t.buf.len())?;
        s.synchronize()?;
        r.take()
    }
}

fn run() -> Result<()> {
    let kind = xstream_examples::choose_backend(Capabilities::empty())?;
    let rt = Runtime::new(kind)?;
    println!("backend {kind}, device {}", rt.dev.info().name);

    let a: Vec<u8> = (0..N).map(|i| (i % 251) as u8).collect();
    let b: Vec<u8> = (0..N).map(|i| (i * 7 % 253) as u8).collect();
    let ta = rt.upload(a.clone())?;
    let tb = rt.upload(b.clone())?;
    let out = rt.gather(&ta, &tb)?;
    let replayed = rt.replay_header(&out, 3)?;
    let got = rt.download(&out)?;

    let mut want = [a, b].concat();
    want[..HEADER].fill(0xff);
    if replayed {
        want[HEADER..2 * HEADER].fill(0x11);
        println!("graph: the header write captured and replayed 3 times");
    } else {
        println!("graph: skipped ({kind} does not capture)");
    }
    if got != want {
        let at = got.iter().zip(&want).position(|(x, y)| x != y);
        return Err(Error::invalid(format!(
            "the gathered tensor differs from the host reference (first at byte {at:?})"
        )));
    }
    println!(
        "verified: the gathered tensor ({} bytes) matches the host reference",
        got.len()
    );

    // Objects of two backends do not mix: a run-time error, where the generic path would not
    // compile.
    if kind != BackendKind::Host {
        let host = AnyDevice::open(BackendKind::Host, 0)?;
        let hs = host.create_stream(&StreamDesc::new())?;
        match out.ready.record(&hs) {
            Err(e @ Error::WrongBackend { .. }) => println!("mixing refused: {e}"),
            other => {
                return Err(Error::invalid(format!(
                    "recording a {kind} event on a host stream gave {other:?}"
                )))
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    xstream_examples::init_tracing();
    xstream_examples::exit_code(run())
}
