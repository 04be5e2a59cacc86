// capture_memcheck.cu: does a relaxed-mode stream capture survive a kernel's first launch under
// compute-sanitizer memcheck, with no xstream code involved? Driver API, a module loaded from
// PTX (as xstream's CUDA backend loads its builtin module), a non-blocking stream.
//
// Build: nvcc -O2 -o capture_memcheck capture_memcheck.cu -lcuda
// Usage: capture_memcheck [warm]   ("warm": launch the kernel once before the capture begins)
// Prints one line per step and "RESULT ok" or "RESULT invalidated (code N)"; exit 0 / 2.
#include <cuda.h>
#include <stdio.h>
#include <string.h>

static const char *ptx =
    ".version 7.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry touch(.param .u64 p)\n{\n"
    "  .reg .b64 %rd<3>;\n  .reg .b32 %r<3>;\n"
    "  ld.param.u64 %rd1, [p];\n  cvta.to.global.u64 %rd2, %rd1;\n"
    "  ld.global.u32 %r1, [%rd2];\n  add.s32 %r2, %r1, 1;\n  st.global.u32 [%rd2], %r2;\n"
    "  ret;\n}\n";

#define CK(x)                                                                                      \
    do {                                                                                           \
        CUresult r_ = (x);                                                                         \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            const char *n_ = 0;                                                                    \
            cuGetErrorName(r_, &n_);                                                               \
            printf("%s -> %d (%s)\n", #x, (int)r_, n_ ? n_ : "?");                                 \
            return r_;                                                                             \
        }                                                                                          \
    } while (0)

static int run(int warm) {
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUstream s;
    CUdeviceptr p;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuModuleGetFunction(&fn, mod, "touch"));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&p, 4));
    CK(cuMemsetD32(p, 0, 1));
    void *args[] = {&p};
    if (warm) {
        CK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, args, 0));
        CK(cuStreamSynchronize(s));
        printf("warm-up launch done\n");
    }
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    printf("capture begun (relaxed)\n");
    CUresult lr = cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, args, 0);
    printf("launch in capture -> %d\n", (int)lr);
    CUgraph g = 0;
    CUresult er = cuStreamEndCapture(s, &g);
    printf("end capture -> %d\n", (int)er);
    if (lr != CUDA_SUCCESS || er != CUDA_SUCCESS) {
        printf("RESULT invalidated (code %d)\n", (int)(lr != CUDA_SUCCESS ? lr : er));
        return 2;
    }
    CUgraphExec ge;
    CK(cuGraphInstantiate(&ge, g, 0));
    CK(cuGraphLaunch(ge, s));
    CK(cuStreamSynchronize(s));
    unsigned v = 0;
    CK(cuMemcpyDtoH(&v, p, 4));
    printf("value after replay %u (expected %u)\n", v, warm ? 2u : 1u);
    printf("RESULT ok\n");
    return v == (warm ? 2u : 1u) ? 0 : 3;
}

int main(int argc, char **argv) {
    int warm = argc > 1 && strcmp(argv[1], "warm") == 0;
    return run(warm);
}
