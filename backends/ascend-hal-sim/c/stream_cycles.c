/* Issue 31 probe: streams opened and closed in rounds on the real CANN runtime (libacl_rt.so)
 * over the emulated driver, then the device reset. Round 1 creates streams with
 * aclrtCreateStream until MAX or the first refusal; every later round creates as many again;
 * each stream is synchronized and destroyed at the end of its round. Prints one line with the
 * count, the refusal code (0: none), the time of each phase and the reset's result; a crash
 * inside aclrtResetDevice ends the process before that line (status 139).
 * Usage: stream_cycles /path/to/libacl_rt.so MAX ROUNDS */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*fn_init)(const char *);
typedef int (*fn_i32)(int32_t);
typedef int (*fn_ptr)(void *);
typedef int (*fn_pptr)(void **);

static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) { printf("FAIL: symbol %s missing: %s\n", name, dlerror()); exit(1); }
    return p;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s LIBACL_RT MAX ROUNDS\n", argv[0]); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!lib) { printf("FAIL: dlopen %s: %s\n", argv[1], dlerror()); return 1; }
    int max = atoi(argv[2]), rounds = atoi(argv[3]);
    if (max < 1 || rounds < 1) { fprintf(stderr, "MAX and ROUNDS must be positive\n"); return 2; }
    fn_init init = (fn_init)sym(lib, "aclInit");
    fn_i32 set_device = (fn_i32)sym(lib, "aclrtSetDevice");
    fn_i32 reset_device = (fn_i32)sym(lib, "aclrtResetDevice");
    fn_pptr create = (fn_pptr)sym(lib, "aclrtCreateStream");
    fn_ptr destroy = (fn_ptr)sym(lib, "aclrtDestroyStream");
    fn_ptr synchronize = (fn_ptr)sym(lib, "aclrtSynchronizeStream");
    if (init(NULL) != 0 || set_device(0) != 0) { printf("FAIL: aclInit / aclrtSetDevice\n"); return 1; }
    void **s = calloc((size_t)max, sizeof(void *));
    int n = max, refused = 0, bad = 0;
    double t_create = 0, t_destroy = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = now();
        int m = 0, rc = 0;
        while (m < n && (rc = create(&s[m])) == 0) m++;
        if (r == 0) { n = m; refused = rc; }
        else if (m < n) { printf("FAIL: round %d created %d of %d (code %d)\n", r + 1, m, n, rc); bad++; }
        double t1 = now();
        for (int i = 0; i < m; i++) {
            if (synchronize(s[i]) != 0 || destroy(s[i]) != 0) bad++;
        }
        t_create += t1 - t0;
        t_destroy += now() - t1;
    }
    printf("%d streams x %d rounds, first refusal code %d: create %.2f s, synchronize+destroy %.2f s, %d errors; reset ... ",
           n, rounds, refused, t_create, t_destroy, bad);
    fflush(stdout);
    double t2 = now();
    int rc = reset_device(0);
    printf("returned %d in %.2f s\n", rc, now() - t2);
    return (rc == 0 && bad == 0) ? 0 : 1;
}
