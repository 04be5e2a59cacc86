//! Two processes sharing a device buffer and events: a producer writes data, a consumer
//! transforms it on the device, the producer reads the answer. The consumer's stream waits on
//! the producer's interprocess event (a device-side wait: the consumer's host thread only
//! enqueues and never blocks on the producer), and the producer's stream waits on the
//! consumer's.
//!
//! ```sh
//! cargo run -p xstream-examples --bin ipc_producer_consumer -- --backend host
//! cargo run -p xstream-examples --bin ipc_producer_consumer -- --backend cuda
//! XSTREAM_ACL_LIBRARY=target/debug/libascendcl.so \
//!     cargo run -p xstream-examples --bin ipc_producer_consumer -- --backend ascend
//! ```
//!
//! The program is the producer; it starts itself again as the consumer (environment
//! `XSTREAM_IPC_ROLE=consumer`) and hands it three handles on its standard input, as hex: the
//! buffer ([`IpcBuffer`]) and the events `ready` and `done` ([`IpcEvent`]).
//!
//! 1. producer: a device-side delay, then the data written, then `ready` recorded, all
//!    enqueued; the handles go to the consumer;
//! 2. consumer: its stream waits on `ready`, runs the LCG kernel on the imported buffer and
//!    records `done`; it says so and only then synchronizes;
//! 3. producer: its stream waits on `done` and reads the buffer back; the host checks it
//!    against the reference.
//!
//! Backends: host (shared memory under `/dev/shm`), CUDA (`cuIpc*`) and Ascend (the ACL IPC
//! event calls and export keys; on the ACL simulator's default A2, which has IPC (`XSIM_IPC=0`
//! takes it away); a product without IPC events is refused when the device is chosen).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use xstream::{
    lcg_reference, Backend, BackendKind, Capabilities, Device, Error, Event, EventDesc, EventFlags,
    IpcBuffer, IpcEvent, IpcEventHandle, IpcMemHandle, Kernel, Result, Stream, StreamDesc,
    StreamFlags,
};

/// The environment variable that makes this program the consumer.
const ROLE_ENV: &str = "XSTREAM_IPC_ROLE";
/// Bytes shared (a multiple of 4: the kernel works on `u32` words).
const BYTES: usize = 256 * 1024;
/// LCG rounds the consumer runs.
const ROUNDS: u32 = 4;
/// How long the producer's device-side delay holds its data back.
const DELAY: Duration = Duration::from_millis(300);
/// How long the producer waits for the consumer before giving up.
const BOUND: Duration = Duration::from_secs(60);

fn data() -> Vec<u8> {
    (0..BYTES)
        .map(|i| (i.wrapping_mul(13) ^ 0x5a) as u8)
        .collect()
}

fn nb<B: Backend>(dev: &B::Device) -> Result<B::Stream> {
    dev.create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))
}

fn ipc_event<B: Backend>(dev: &B::Device) -> Result<B::Event> {
    dev.create_event(&EventDesc::new().flags(EventFlags::INTERPROCESS))
}

fn producer<B: Backend>() -> Result<()>
where
    B::Buffer: IpcBuffer<B = B>,
    B::Event: IpcEvent<B = B>,
{
    let dev = B::open(0)?;
    let info = dev.info();
    println!(
        "backend {}, device {} ({})",
        B::KIND,
        info.name,
        info.driver
    );
    let s = nb::<B>(&dev)?;
    let buf = dev.alloc(BYTES)?;
    let (ready, done) = (ipc_event::<B>(&dev)?, ipc_event::<B>(&dev)?);
    // Held back on the device, so the consumer's wait below really waits.
    s.launch_builtin(Kernel::Delay(DELAY))?;
    s.write(&buf, 0, data())?;
    ready.record(&s)?;

    let exe = std::env::current_exe().map_err(|e| Error::invalid(format!("current_exe: {e}")))?;
    let mut child = Command::new(exe)
        .args(["--backend", B::KIND.name()])
        .env(ROLE_ENV, "consumer")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| Error::invalid(format!("start the consumer: {e}")))?;
    let handles = format!(
        "{} {} {}\n",
        buf.export_ipc()?.to_hex(),
        ready.export_ipc()?.to_hex(),
        done.export_ipc()?.to_hex()
    );
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| Error::invalid("no stdin"))?;
    stdin
        .write_all(handles.as_bytes())
        .map_err(|e| Error::invalid(format!("hand the consumer its handles: {e}")))?;
    // The consumer says when it enqueued its record of `done`: from then on our wait on
    // `done` refers to that record.
    let out = child
        .stdout
        .take()
        .ok_or_else(|| Error::invalid("no stdout"))?;
    let mut lines = BufReader::new(out).lines();
    let mut enqueued = false;
    for line in lines.by_ref() {
        let line = line.map_err(|e| Error::invalid(format!("consumer output: {e}")))?;
        println!("  consumer: {line}");
        if line.starts_with("enqueued") {
            enqueued = true;
            break;
        }
    }
    if !enqueued {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Error::invalid(
            "the consumer ended before enqueueing its work",
        ));
    }
    s.wait_event(&done)?;
    let r = s.read(&buf, 0, BYTES)?;
    s.synchronize_timeout(BOUND)?;
    let got = r.take()?;
    for line in lines {
        println!("  consumer: {}", line.unwrap_or_default());
    }
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child
            .try_wait()
            .map_err(|e| Error::invalid(format!("{e}")))?
        {
            break st;
        }
        if start.elapsed() > BOUND {
            let _ = child.kill();
            return Err(Error::invalid("the consumer did not exit"));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    if !status.success() {
        return Err(Error::invalid(format!("the consumer failed ({status})")));
    }
    let mut want = data();
    lcg_reference(&mut want, ROUNDS);
    if got != want {
        return Err(Error::invalid(
            "the buffer does not hold the consumer's result",
        ));
    }
    println!("verified: the consumer's result ({BYTES} bytes) matches the host reference");
    Ok(())
}

fn consumer<B: Backend>() -> Result<()>
where
    B::Buffer: IpcBuffer<B = B>,
    B::Event: IpcEvent<B = B>,
{
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| Error::invalid(format!("read the handles: {e}")))?;
    let mut parts = line.split_whitespace();
    let mut next = || {
        parts
            .next()
            .ok_or_else(|| Error::invalid("three handles expected"))
    };
    let mem = IpcMemHandle::from_hex(next()?)?;
    let ready = IpcEventHandle::from_hex(next()?)?;
    let done = IpcEventHandle::from_hex(next()?)?;
    let dev = B::open(0)?;
    let buf = B::Buffer::open_ipc(&dev, &mem)?;
    let (ready, done) = (
        B::Event::open_ipc(&dev, &ready)?,
        B::Event::open_ipc(&dev, &done)?,
    );
    let s = nb::<B>(&dev)?;
    // A device-side wait: this thread goes on at once.
    s.wait_event(&ready)?;
    s.launch_builtin(Kernel::Lcg {
        buf: &buf,
        rounds: ROUNDS,
    })?;
    done.record(&s)?;
    println!("enqueued: wait on the producer, LCG x{ROUNDS} on the shared buffer, record done");
    std::io::stdout().flush().ok();
    s.synchronize_timeout(BOUND)?;
    println!("done");
    Ok(())
}

fn run(kind: BackendKind, consumer_role: bool) -> Result<()> {
    match (kind, consumer_role) {
        (BackendKind::Host, false) => producer::<xstream::HostBackend>(),
        (BackendKind::Host, true) => consumer::<xstream::HostBackend>(),
        (BackendKind::Cuda, false) => producer::<xstream::CudaBackend>(),
        (BackendKind::Cuda, true) => consumer::<xstream::CudaBackend>(),
        (BackendKind::Ascend, false) => producer::<xstream::AscendBackend>(),
        (BackendKind::Ascend, true) => consumer::<xstream::AscendBackend>(),
    }
}

fn main() -> ExitCode {
    let consumer_role = std::env::var(ROLE_ENV).as_deref() == Ok("consumer");
    let r =
        xstream_examples::choose_backend(Capabilities::KERNELS | Capabilities::INTERPROCESS_EVENTS)
            .and_then(|kind| run(kind, consumer_role));
    xstream_examples::exit_code(r)
}
