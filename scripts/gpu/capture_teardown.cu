// capture_teardown.cu: does a stream capture on one thread survive a release made on another
// thread (in RELAXED capture mode, as xstream's reaper and dispatcher are) while it is under
// way? Driver API only, no xstream code. Each operation gets its own capture: the capturing
// thread begins it on a non-blocking stream and launches a kernel into it, a second thread
// switches itself to RELAXED and makes the one call (on objects made before the capture, of
// other streams), is joined, then the capturing thread launches again and ends the capture.
// Run it plainly and under compute-sanitizer memcheck: a difference between the two is the
// tool's, not the driver's. The "_busy" operations first enqueue a 64 MiB copy on the other
// stream, so the call meets pending work; "host_fn_busy_fires" waits until the driver ran the
// host function, on its callback thread, while the capture is under way.
//
// Build: nvcc -O2 -o capture_teardown capture_teardown.cu -lcuda -lpthread
// Usage: capture_teardown [relaxed|global] [fresh|pool|pool_range]
//   the capture's mode (default relaxed), and what the process did before the first capture:
//   nothing more (fresh, the default); pool: a stream-ordered allocation of the default memory
//   pool and its free (cuMemAllocAsync, cuMemFreeAsync) on a stream then synchronized and
//   destroyed; pool_range: the same with cuMemGetAddressRange of the block before the free.
// Prints "OP <name> <mode>: call=<code> capture=ok|invalidated(<code>)" per operation and
// "RESULT <k> of <n> captures invalidated"; exit 0 when none was, 2 when some were, 1 when
// the program itself could not run.
#include <cuda.h>
#include <pthread.h>
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
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static CUcontext ctx;

// What the second thread releases or calls; made before each capture.
struct objs {
    CUdeviceptr dev;
    void *pinned;
    CUevent ev;
    CUstream other;
    CUdeviceptr big;
    void *big_host;
    const char *op;
    CUresult rc;
};

static void host_noop(void *p) { (void)p; }

// Set by host_flag on the driver's callback thread.
static volatile int fired;
static void host_flag(void *p) {
    (void)p;
    __sync_synchronize();
    fired = 1;
}

// A copy of BIG bytes enqueued on `other` just before a "_busy" call, so the call meets a
// stream with work pending (as xstream's teardown of a dropped stream does).
#define BIG (64u << 20)

static void *other_thread(void *arg) {
    struct objs *o = (struct objs *)arg;
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    cuCtxSetCurrent(ctx);
    cuThreadExchangeStreamCaptureMode(&m);
    const char *op = o->op;
    if (!strcmp(op, "mem_free")) {
        o->rc = cuMemFree(o->dev);
        o->dev = 0;
    } else if (!strcmp(op, "mem_free_host")) {
        o->rc = cuMemFreeHost(o->pinned);
        o->pinned = 0;
    } else if (!strcmp(op, "mem_alloc")) {
        CUdeviceptr p;
        o->rc = cuMemAlloc(&p, 1 << 20);
        if (o->rc == CUDA_SUCCESS) cuMemFree(p);
    } else if (!strcmp(op, "event_destroy")) {
        o->rc = cuEventDestroy(o->ev);
        o->ev = 0;
    } else if (!strcmp(op, "event_sync")) {
        o->rc = cuEventSynchronize(o->ev);
    } else if (!strcmp(op, "stream_sync_other")) {
        o->rc = cuStreamSynchronize(o->other);
    } else if (!strcmp(op, "stream_destroy_other")) {
        o->rc = cuStreamDestroy(o->other);
        o->other = 0;
    } else if (!strcmp(op, "host_fn_other")) {
        o->rc = cuLaunchHostFunc(o->other, host_noop, 0);
        if (o->rc == CUDA_SUCCESS) o->rc = cuStreamSynchronize(o->other);
    } else if (!strcmp(op, "host_fn_busy_fires")) {
        // Enqueued behind the copy; the thread waits until the driver ran it, so it runs on the
        // driver's callback thread while the capture is under way.
        fired = 0;
        o->rc = cuMemcpyHtoDAsync(o->big, o->big_host, BIG, o->other);
        if (o->rc == CUDA_SUCCESS) o->rc = cuLaunchHostFunc(o->other, host_flag, 0);
        while (o->rc == CUDA_SUCCESS && !fired) {
        }
    } else if (!strcmp(op, "stream_destroy_busy")) {
        o->rc = cuMemcpyHtoDAsync(o->big, o->big_host, BIG, o->other);
        if (o->rc == CUDA_SUCCESS) o->rc = cuStreamDestroy(o->other);
        o->other = 0;
    } else if (!strcmp(op, "event_destroy_busy")) {
        o->rc = cuMemcpyHtoDAsync(o->big, o->big_host, BIG, o->other);
        if (o->rc == CUDA_SUCCESS) o->rc = cuEventRecord(o->ev, o->other);
        if (o->rc == CUDA_SUCCESS) o->rc = cuEventDestroy(o->ev);
        o->ev = 0;
    } else if (!strcmp(op, "none")) {
        o->rc = CUDA_SUCCESS;
    } else {
        o->rc = CUDA_ERROR_INVALID_VALUE;
    }
    return 0;
}

static const char *ops[] = {"none",       "mem_free",          "mem_free_host",
                            "mem_alloc",  "event_destroy",     "event_sync",
                            "stream_sync_other", "stream_destroy_other", "host_fn_other",
                            "host_fn_busy_fires", "stream_destroy_busy", "event_destroy_busy"};

int main(int argc, char **argv) {
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    const char *mname = "relaxed";
    if (argc > 1 && !strcmp(argv[1], "global")) {
        mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
        mname = "global";
    }
    CUdevice dev;
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
    CK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, args, 0));
    CK(cuStreamSynchronize(s));
    const char *before = argc > 2 ? argv[2] : "fresh";
    if (!strcmp(before, "pool") || !strcmp(before, "pool_range")) {
        CUstream s2;
        CUdeviceptr q, base;
        size_t size = 0;
        CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
        CK(cuMemAllocAsync(&q, 2560, s2));
        if (!strcmp(before, "pool_range")) CK(cuMemGetAddressRange(&base, &size, q));
        CK(cuMemFreeAsync(q, s2));
        CK(cuStreamSynchronize(s2));
        CK(cuStreamDestroy(s2));
    } else if (strcmp(before, "fresh")) {
        printf("unknown setup %s\n", before);
        return 1;
    }
    printf("setup %s\n", before);
    CUdeviceptr big;
    void *big_host;
    CK(cuMemAlloc(&big, BIG));
    CK(cuMemAllocHost(&big_host, BIG));
    int n = (int)(sizeof ops / sizeof ops[0]), bad = 0;
    for (int i = 0; i < n; i++) {
        struct objs o = {0};
        o.op = ops[i];
        o.big = big;
        o.big_host = big_host;
        CK(cuMemAlloc(&o.dev, 1 << 20));
        CK(cuMemAllocHost(&o.pinned, 1 << 20));
        CK(cuEventCreate(&o.ev, CU_EVENT_DISABLE_TIMING));
        CK(cuStreamCreate(&o.other, CU_STREAM_NON_BLOCKING));
        CK(cuMemcpyHtoDAsync(o.dev, o.pinned, 1 << 20, o.other));
        CK(cuEventRecord(o.ev, o.other));
        CK(cuStreamSynchronize(o.other));
        CK(cuStreamBeginCapture(s, mode));
        CUresult l1 = cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, args, 0);
        pthread_t t;
        if (pthread_create(&t, 0, other_thread, &o) != 0) {
            printf("pthread_create failed\n");
            return 1;
        }
        pthread_join(t, 0);
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
        CUresult q = cuStreamIsCapturing(s, &st);
        CUresult l2 = cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, args, 0);
        CUgraph g = 0;
        CUresult er = cuStreamEndCapture(s, &g);
        CUresult first = l1 != CUDA_SUCCESS ? l1 : q != CUDA_SUCCESS ? q : l2 != CUDA_SUCCESS ? l2 : er;
        int ok = first == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
        if (ok) {
            printf("OP %s %s: call=%d capture=ok\n", o.op, mname, (int)o.rc);
        } else {
            bad++;
            printf("OP %s %s: call=%d capture=invalidated(%d, status %d)\n", o.op, mname, (int)o.rc,
                   (int)first, (int)st);
        }
        if (g) cuGraphDestroy(g);
        if (o.dev) cuMemFree(o.dev);
        if (o.pinned) cuMemFreeHost(o.pinned);
        if (o.ev) cuEventDestroy(o.ev);
        if (o.other) cuStreamDestroy(o.other);
        CK(cuStreamSynchronize(s));
    }
    CK(cuCtxSynchronize());
    CK(cuMemFreeHost(big_host));
    CK(cuMemFree(big));
    CK(cuMemFree(p));
    CK(cuStreamDestroy(s));
    CK(cuModuleUnload(mod));
    CK(cuDevicePrimaryCtxRelease(dev));
    printf("RESULT %d of %d captures invalidated\n", bad, n);
    return bad ? 2 : 0;
}
