//! Your own kernel on xstream streams, launched directly and then captured into a graph and
//! replayed.
//!
//! The kernel is loaded as a module, one per backend, and launched through the one path every
//! backend shares ([`Stream::launch_kernel`] with a [`LaunchConfig`] and typed
//! [`KernelArg`]s):
//!
//! | backend | where the kernel comes from |
//! |---|---|
//! | host | a Rust function in a [`HostModule`] ([`host_module`]) |
//! | CUDA | PTX text in this file ([`AFFINE_PTX`]), loaded with `cuModuleLoadData` |
//! | Ascend | the builtin module's [`BUILTIN_LCG`] (an ACL kernel binary; on the simulator, its test-only format); your own: [`ModuleSource::AscendBinary`] with your binary's bytes |
//!
//! All three compute the same thing, one round of `x = x * 1664525 + 1013904223` on every
//! `u32` word, so one host reference ([`lcg_reference`]) checks them all. To start from here
//! with your own kernel: replace the Rust function and the PTX (keeping their parameter lists
//! equal to [`AFFINE_PARAMS`]) and the reference.
//!
//! The program launches the kernel once on a stream, checks the result, then captures
//! [`STEPS`] launches into a graph, replays the graph [`REPLAYS`] times and checks again.
//!
//! ```sh
//! cargo run -p xstream-examples --bin user_kernel -- --backend host
//! ```
//!
//! On an Ascend runtime that cannot load the builtin module (a real CANN runtime, or the
//! simulator with `XSIM_REAL_KERNELS=1`) there is no kernel binary to launch: the program says
//! so on stderr (`needs a kernel binary: ...`) and exits with status 3
//! ([`xstream_examples::EXIT_NEEDS_KERNEL_BINARY`]), never falling back to another backend.

use std::process::ExitCode;

use xstream::module::BUILTIN_LCG;
use xstream::{
    lcg_reference, Backend, BackendKind, BufferOf, Capabilities, CaptureMode, Device, Error,
    Function, FunctionOf, Graph, HostModule, KernelArg, LaunchConfig, Module, ModuleSource,
    ParamKind, Result, Stream, StreamDesc, StreamFlags,
};

/// The multiplier of the kernel (that of [`lcg_reference`]).
const A: u32 = 1_664_525;
/// The increment of the kernel (that of [`lcg_reference`]).
const C: u32 = 1_013_904_223;
/// The user kernel's name, in the host module and in the PTX.
const AFFINE: &str = "affine_u32";
/// Its parameters: `affine_u32(buffer data, u32 words, u32 a, u32 c)`.
const AFFINE_PARAMS: &[ParamKind] = &[
    ParamKind::Buffer,
    ParamKind::U32,
    ParamKind::U32,
    ParamKind::U32,
];
/// Words in the buffer.
const WORDS: u32 = 1 << 14;
/// Threads per block.
const BLOCK: u32 = 256;
/// Launches captured into the graph.
const STEPS: u32 = 4;
/// Replays of the graph.
const REPLAYS: u32 = 3;

/// The CUDA version of the kernel: a grid-stride loop, `data[i] = data[i] * a + c` for every
/// `i < words`. PTX for `sm_70`, compiled by the driver for the GPU at load time.
pub const AFFINE_PTX: &str = r#"
.version 8.0
.target sm_70
.address_size 64

.visible .entry affine_u32(.param .u64 data, .param .u32 words, .param .u32 a, .param .u32 c)
{
    .reg .pred %p<2>;
    .reg .u32 %r<10>;
    .reg .u64 %rd<6>;
    ld.param.u64 %rd1, [data];
    ld.param.u32 %r1, [words];
    ld.param.u32 %r2, [a];
    ld.param.u32 %r3, [c];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r4, %ctaid.x;
    mov.u32 %r5, %ntid.x;
    mov.u32 %r6, %tid.x;
    mad.lo.u32 %r7, %r4, %r5, %r6;
    mov.u32 %r8, %nctaid.x;
    mul.lo.u32 %r8, %r8, %r5;
AFFINE_LOOP:
    setp.ge.u32 %p1, %r7, %r1;
    @%p1 bra AFFINE_DONE;
    mul.wide.u32 %rd2, %r7, 4;
    add.u64 %rd3, %rd1, %rd2;
    ld.global.u32 %r9, [%rd3];
    mad.lo.u32 %r9, %r9, %r2, %r3;
    st.global.u32 [%rd3], %r9;
    add.u32 %r7, %r7, %r8;
    bra AFFINE_LOOP;
AFFINE_DONE:
    ret;
}
"#;

/// The host version of the kernel: a Rust function over the launch's arguments (checked
/// against [`AFFINE_PARAMS`] before it runs). It runs once per launch, in stream order, so it
/// covers the whole buffer itself; the launch configuration is there if a kernel wants it.
pub fn host_module() -> HostModule {
    HostModule::new().with_kernel(AFFINE, AFFINE_PARAMS, |_cfg, args| {
        let words = args[1].u32()? as usize;
        let (a, c) = (args[2].u32()?, args[3].u32()?);
        let data = args[0].buffer()?;
        for w in data.chunks_exact_mut(4).take(words) {
            let x = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
            w.copy_from_slice(&x.wrapping_mul(a).wrapping_add(c).to_le_bytes());
        }
        Ok(())
    })
}

/// A loaded kernel and how to call it on this backend.
struct UserKernel<B: Backend> {
    f: FunctionOf<B>,
    /// Where it came from, for the output.
    from: &'static str,
}

impl<B: Backend> UserKernel<B> {
    /// Loads the kernel for `B` (see the table in the module docs).
    fn load(dev: &B::Device) -> Result<Self> {
        let (module, name, from) = match B::KIND {
            BackendKind::Host => (
                dev.load_module(&ModuleSource::Host(host_module()))?,
                AFFINE,
                "a host module (a Rust function)",
            ),
            BackendKind::Cuda => (
                dev.load_module(&ModuleSource::Ptx(AFFINE_PTX))?,
                AFFINE,
                "PTX text",
            ),
            BackendKind::Ascend => (dev.builtin_module()?, BUILTIN_LCG, "the builtin module"),
        };
        Ok(Self {
            f: module.function(name)?,
            from,
        })
    }

    /// The arguments of one launch over the first `words` words of `buf`.
    fn args<'a>(&self, buf: &'a BufferOf<B>, words: u32) -> Vec<KernelArg<'a, BufferOf<B>>> {
        if self.f.name() == BUILTIN_LCG {
            // xstream_lcg(buffer, u32 words, u32 rounds): one round is the same update.
            vec![
                KernelArg::Buffer(buf),
                KernelArg::U32(words),
                KernelArg::U32(1),
            ]
        } else {
            vec![
                KernelArg::Buffer(buf),
                KernelArg::U32(words),
                KernelArg::U32(A),
                KernelArg::U32(C),
            ]
        }
    }

    /// Enqueues one launch on `s` (eagerly, or into the graph while `s` captures).
    fn launch(&self, s: &B::Stream, buf: &BufferOf<B>) -> Result<()> {
        let cfg = LaunchConfig::for_items(WORDS, BLOCK);
        s.launch_kernel(&self.f, &cfg, &self.args(buf, WORDS))
    }
}

/// Reads `buf` back and compares it with `want`.
fn check<B: Backend>(s: &B::Stream, buf: &BufferOf<B>, want: &[u8], what: &str) -> Result<()> {
    let back = s.read(buf, 0, want.len())?;
    s.synchronize()?;
    if back.take()? != want {
        return Err(Error::invalid(format!(
            "{what}: the device result differs from the host reference"
        )));
    }
    Ok(())
}

/// The whole program, for any backend `B`: `Ok(Some(why))` when the device has no kernel
/// binary to run (Ascend without the builtin module).
fn run<B: Backend>() -> Result<Option<String>> {
    let dev = B::open(0)?;
    println!("backend {}, device {}", B::KIND, dev.info().name);
    let caps = dev.info().capabilities;
    if !caps.contains(Capabilities::MODULES) {
        return Err(Error::unsupported(B::KIND, "kernel modules on this device"));
    }
    if B::KIND == BackendKind::Ascend && !caps.contains(Capabilities::KERNELS) {
        return Ok(Some(match dev.builtin_module() {
            Err(e) => format!(
                "this Ascend runtime cannot load the builtin module, and no binary of your own \
                 kernel is given (ModuleSource::AscendBinary): {e}"
            ),
            Ok(_) => "the device has no built-in kernels".to_string(),
        }));
    }
    let k = UserKernel::<B>::load(&dev)?;
    let declared = match k.f.params() {
        Some(p) => format!("{} parameter kinds declared", p.len()),
        None => "parameter kinds not declared".to_string(),
    };
    println!("kernel `{}` from {} ({declared})", k.f.name(), k.from);

    // A non-default stream: the default stream cannot be captured.
    let s = dev.create_stream(&StreamDesc::new().flags(StreamFlags::NON_BLOCKING))?;
    let buf = dev.alloc(WORDS as usize * 4)?;
    let mut want: Vec<u8> = (0..WORDS).flat_map(|i| (i * 7 + 1).to_le_bytes()).collect();
    s.write(&buf, 0, want.clone())?;

    // 1. One launch, executed at once.
    k.launch(&s, &buf)?;
    lcg_reference(&mut want, 1);
    check::<B>(&s, &buf, &want, "the direct launch")?;
    println!("verified: the direct launch matches the host reference");

    // 2. The same launches captured into a graph (nothing runs while capturing), then the
    //    graph replayed: one submission per replay instead of one per launch.
    if !caps.contains(Capabilities::CAPTURE) {
        println!("capture: NOT RUN (the {} device cannot capture)", B::KIND);
        return Ok(None);
    }
    s.begin_capture(CaptureMode::Global)?;
    for _ in 0..STEPS {
        k.launch(&s, &buf)?;
    }
    let graph = s.end_capture()?;
    for _ in 0..REPLAYS {
        graph.replay(&s)?;
    }
    lcg_reference(&mut want, STEPS * REPLAYS);
    check::<B>(&s, &buf, &want, "the graph replays")?;
    println!(
        "graph: {} nodes from {STEPS} captured launches",
        graph.node_count()
    );
    println!("verified: the graph replayed {REPLAYS} times matches the host reference");
    Ok(None)
}

fn main() -> ExitCode {
    xstream_examples::init_tracing();
    let r = xstream_examples::choose_backend(Capabilities::MODULES)
        .and_then(|kind| xstream::dispatch!(kind, B => run::<B>()));
    match r {
        Ok(Some(why)) => xstream_examples::needs_kernel_binary("user_kernel", &why),
        Ok(None) => ExitCode::SUCCESS,
        Err(e) => xstream_examples::exit_code(Err(e)),
    }
}
