// free_stall.cu: does a driver call on one thread stall another thread's calls while a stream
// is held by a host function? The GPU repro behind issue 29's conformance flake
// (`event_pool_bounded` after `record_event_orders`, "the gate gave up before it was opened").
//
//   nvcc -O2 -o /tmp/free_stall scripts/gpu/free_stall.cu -lcuda -lpthread && /tmp/free_stall
//
// For each variant: stream A is held by a host function (a gate that waits for the main thread
// to open it, at most GUARD_MS); once the gate runs, a second thread makes the variant's call
// (cuMemFree of an idle buffer, cuMemFreeHost, cuStreamDestroy of an idle used stream,
// cuEventDestroy, cuMemAlloc, cuMemFreeAsync of a cuMemAlloc buffer, or nothing); 20 ms later
// the main thread makes non-blocking calls on another stream B (cuStreamQuery, cuEventRecord,
// cuMemsetD8Async, cuMemcpyDtoDAsync, cuStreamWaitEvent) and only then opens the gate. A main
// thread call that lasts about GUARD_MS was held by the driver until the gate gave up: the
// shape of the conformance failure (and a deadlock without the guard). One line per variant:
//   variant <name> rc <code of the second thread's call> other_ms <its duration>
//     main_max_ms <longest main-thread call> <call>=<ms> ... gate <opened|gave up>
// Exit status 0 when every call returned (the verdict is in the lines, not the status).
#include <cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GUARD_MS 2000.0
#define CK(x)                                                                            \
    do {                                                                                 \
        CUresult r_ = (x);                                                               \
        if (r_ != CUDA_SUCCESS) {                                                        \
            fprintf(stderr, "%s:%d %s = %d\n", __FILE__, __LINE__, #x, (int)r_);          \
            return 1;                                                                    \
        }                                                                                \
    } while (0)

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

struct Gate {
    volatile int entered, open, gave_up;
};

static void CUDA_CB gate_fn(void *p) {
    struct Gate *g = (struct Gate *)p;
    g->entered = 1;
    double t0 = now_ms();
    while (!g->open) {
        if (now_ms() - t0 > GUARD_MS) {
            g->gave_up = 1;
            return;
        }
        usleep(100);
    }
}

enum Kind { NONE, MEM_FREE, MEM_FREE_HOST, STREAM_DESTROY, EVENT_DESTROY, MEM_ALLOC, FREE_ASYNC };
static const char *NAMES[] = {"none",          "cuMemFree",       "cuMemFreeHost",
                              "cuStreamDestroy", "cuEventDestroy", "cuMemAlloc",
                              "cuMemFreeAsync(cuMemAlloc buffer)"};

struct Other {
    CUcontext ctx;
    enum Kind kind;
    CUdeviceptr dptr;
    void *hptr;
    CUstream s;
    CUevent e;
    CUdeviceptr extra;
    CUresult rc;
    double ms;
};

static void *other_fn(void *p) {
    struct Other *o = (struct Other *)p;
    cuCtxSetCurrent(o->ctx);
    double t0 = now_ms();
    CUdeviceptr d = 0;
    switch (o->kind) {
    case NONE: o->rc = CUDA_SUCCESS; break;
    case MEM_FREE: o->rc = cuMemFree(o->dptr); break;
    case MEM_FREE_HOST: o->rc = cuMemFreeHost(o->hptr); break;
    case STREAM_DESTROY: o->rc = cuStreamDestroy(o->s); break;
    case EVENT_DESTROY: o->rc = cuEventDestroy(o->e); break;
    case MEM_ALLOC:
        o->rc = cuMemAlloc(&d, 1 << 20);
        o->extra = d;
        break;
    case FREE_ASYNC: o->rc = cuMemFreeAsync(o->dptr, o->s); break;
    }
    o->ms = now_ms() - t0;
    return NULL;
}

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    int drv = 0;
    cuDriverGetVersion(&drv);
    printf("free_stall: driver API %d, gate guard %.0f ms\n", drv, GUARD_MS);
    CUstream a, b;
    CK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CUevent e, e2;
    CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr src, dst;
    CK(cuMemAlloc(&src, 4096));
    CK(cuMemAlloc(&dst, 4096));
    for (int k = NONE; k <= FREE_ASYNC; k++) {
        struct Other o;
        memset(&o, 0, sizeof o);
        o.ctx = ctx;
        o.kind = (enum Kind)k;
        CK(cuMemAlloc(&o.dptr, 4096));
        CK(cuMemsetD8(o.dptr, 1, 4096));
        CK(cuMemAllocHost(&o.hptr, 4096));
        CK(cuStreamCreate(&o.s, CU_STREAM_NON_BLOCKING));
        CK(cuMemsetD8Async(o.dptr, 2, 4096, o.s)); // a used stream, idle once synchronized
        CK(cuStreamSynchronize(o.s));
        CK(cuEventCreate(&o.e, CU_EVENT_DISABLE_TIMING));
        CK(cuCtxSynchronize());
        struct Gate g;
        memset(&g, 0, sizeof g);
        CK(cuLaunchHostFunc(a, gate_fn, &g));
        while (!g.entered) usleep(50);
        pthread_t t;
        pthread_create(&t, NULL, other_fn, &o);
        usleep(20000);
        const char *calls[] = {"cuStreamQuery", "cuEventRecord", "cuMemsetD8Async",
                               "cuMemcpyDtoDAsync", "cuStreamWaitEvent"};
        double ms[5];
        CUresult rc[5];
        double t0 = now_ms();
        rc[0] = cuStreamQuery(b);
        ms[0] = now_ms() - t0;
        t0 = now_ms();
        rc[1] = cuEventRecord(e, b);
        ms[1] = now_ms() - t0;
        t0 = now_ms();
        rc[2] = cuMemsetD8Async(src, 3, 4096, b);
        ms[2] = now_ms() - t0;
        t0 = now_ms();
        rc[3] = cuMemcpyDtoDAsync(dst, src, 4096, b);
        ms[3] = now_ms() - t0;
        t0 = now_ms();
        rc[4] = cuStreamWaitEvent(b, e2, 0);
        ms[4] = now_ms() - t0;
        g.open = 1;
        pthread_join(t, NULL);
        CK(cuCtxSynchronize());
        double mx = 0;
        int at = 0;
        for (int i = 0; i < 5; i++)
            if (ms[i] > mx) mx = ms[i], at = i;
        printf("variant %s rc %d other_ms %.2f main_max_ms %.2f (%s)", NAMES[k], (int)o.rc, o.ms,
               mx, calls[at]);
        for (int i = 0; i < 5; i++) printf(" %s=%.3f/rc%d", calls[i], ms[i], (int)rc[i]);
        printf(" gate %s\n", g.gave_up ? "gave up" : "opened");
        fflush(stdout);
        if (k != MEM_FREE && k != FREE_ASYNC) cuMemFree(o.dptr);
        if (o.extra) cuMemFree(o.extra);
        if (k != MEM_FREE_HOST) cuMemFreeHost(o.hptr);
        if (k != STREAM_DESTROY) cuStreamDestroy(o.s);
        if (k != EVENT_DESTROY) cuEventDestroy(o.e);
    }
    return 0;
}
