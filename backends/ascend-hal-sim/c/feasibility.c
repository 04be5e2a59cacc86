/* Feasibility check for issue 24: the real CANN runtime (libacl_rt.so, built from hicann/runtime)
 * over the emulated driver (libascend_hal.so from backends/ascend-hal-sim).
 * Sequence: aclInit, aclrtSetDevice, aclrtCreateStream, aclrtMalloc, aclrtMemcpyAsync H2D then D2H
 * (and D2D in between), aclrtSynchronizeStream, compare. Prints PASS/FAIL per step; exits 0 only
 * when the data came back intact.
 * Usage: feasibility /path/to/libacl_rt.so */
#include <dlfcn.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int (*fn_init)(const char *);
typedef int (*fn_i32)(int32_t);
typedef int (*fn_ptr)(void *);
typedef int (*fn_pptr)(void **);
typedef int (*fn_malloc)(void **, size_t, int);
typedef int (*fn_memcpy_async)(void *, size_t, const void *, size_t, int, void *);
typedef int (*fn_void)(void);

enum { H2D = 1, D2H = 2, D2D = 3 };

static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) { printf("FAIL: symbol %s missing: %s\n", name, dlerror()); exit(1); }
    return p;
}

#define STEP(expr, what) do { int rc_ = (expr); if (rc_ != 0) { printf("FAIL: %s returned %d\n", what, rc_); return 1; } printf("ok: %s\n", what); } while (0)

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s LIBACL_RT\n", argv[0]); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!lib) { printf("FAIL: dlopen %s: %s\n", argv[1], dlerror()); return 1; }
    fn_init aclInit = (fn_init)sym(lib, "aclInit");
    fn_i32 aclrtSetDevice = (fn_i32)sym(lib, "aclrtSetDevice");
    fn_i32 aclrtResetDevice = (fn_i32)sym(lib, "aclrtResetDevice");
    fn_pptr aclrtCreateStream = (fn_pptr)sym(lib, "aclrtCreateStream");
    fn_ptr aclrtDestroyStream = (fn_ptr)sym(lib, "aclrtDestroyStream");
    fn_ptr aclrtSynchronizeStream = (fn_ptr)sym(lib, "aclrtSynchronizeStream");
    fn_malloc aclrtMalloc = (fn_malloc)sym(lib, "aclrtMalloc");
    fn_ptr aclrtFree = (fn_ptr)sym(lib, "aclrtFree");
    fn_memcpy_async aclrtMemcpyAsync = (fn_memcpy_async)sym(lib, "aclrtMemcpyAsync");
    fn_void aclFinalize = (fn_void)sym(lib, "aclFinalize");

    enum { N = 1 << 20 };
    unsigned char *src = malloc(N), *dst = malloc(N);
    for (size_t i = 0; i < N; i++) { src[i] = (unsigned char)(i * 7 + 3); dst[i] = 0; }

    STEP(aclInit(NULL), "aclInit");
    STEP(aclrtSetDevice(0), "aclrtSetDevice(0)");
    void *stream = NULL;
    STEP(aclrtCreateStream(&stream), "aclrtCreateStream");
    void *d0 = NULL, *d1 = NULL;
    STEP(aclrtMalloc(&d0, N, 0), "aclrtMalloc d0");
    STEP(aclrtMalloc(&d1, N, 0), "aclrtMalloc d1");
    STEP(aclrtMemcpyAsync(d0, N, src, N, H2D, stream), "aclrtMemcpyAsync H2D");
    STEP(aclrtMemcpyAsync(d1, N, d0, N, D2D, stream), "aclrtMemcpyAsync D2D");
    STEP(aclrtMemcpyAsync(dst, N, d1, N, D2H, stream), "aclrtMemcpyAsync D2H");
    STEP(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream");
    if (memcmp(src, dst, N) != 0) {
        size_t i = 0; while (i < N && src[i] == dst[i]) i++;
        printf("FAIL: data did not round-trip (first difference at byte %zu: %u != %u)\n", i, src[i], dst[i]);
        return 1;
    }
    printf("PASS: %d bytes round-tripped host -> device -> device -> host through the CANN runtime\n", N);
    STEP(aclrtFree(d0), "aclrtFree d0");
    STEP(aclrtFree(d1), "aclrtFree d1");
    STEP(aclrtDestroyStream(stream), "aclrtDestroyStream");
    STEP(aclrtResetDevice(0), "aclrtResetDevice");
    STEP(aclFinalize(), "aclFinalize");
    return 0;
}
