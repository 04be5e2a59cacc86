/* Issue 24 probe: what the real CANN runtime (libacl_rt.so) over the emulated driver answers to
 * aclrtQueryEventStatus for an event whose record has already run on the device, query after
 * query, before and after aclrtSynchronizeStream. Prints one line per answer
 * (1 = COMPLETE, 0 = NOT_READY); exits 1 if a call fails.
 * Usage: event_query /path/to/libacl_rt.so */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*fn_init)(const char *);
typedef int (*fn_i32)(int32_t);
typedef int (*fn_ptr)(void *);
typedef int (*fn_pptr)(void **);
typedef int (*fn_pptr_u32)(void **, uint32_t);
typedef int (*fn_ptr_ptr)(void *, void *);
typedef int (*fn_ptr_pi32)(void *, int32_t *);

static void *sym(void *lib, const char *name) {
    void *p = dlsym(lib, name);
    if (!p) { printf("FAIL: symbol %s missing: %s\n", name, dlerror()); exit(1); }
    return p;
}

#define CALL(expr, what) do { int rc_ = (expr); if (rc_ != 0) { printf("FAIL: %s returned %d\n", what, rc_); exit(1); } } while (0)

static fn_ptr_pi32 query;

static void ask(const char *label, void *ev, int times) {
    printf("%s:", label);
    for (int i = 0; i < times; i++) {
        int32_t st = -1;
        CALL(query(ev, &st), "aclrtQueryEventStatus");
        printf(" %d", st);
    }
    printf("\n");
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s LIBACL_RT\n", argv[0]); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!lib) { printf("FAIL: dlopen %s: %s\n", argv[1], dlerror()); return 1; }
    fn_init aclInit = (fn_init)sym(lib, "aclInit");
    fn_i32 aclrtSetDevice = (fn_i32)sym(lib, "aclrtSetDevice");
    fn_pptr aclrtCreateStream = (fn_pptr)sym(lib, "aclrtCreateStream");
    fn_ptr aclrtSynchronizeStream = (fn_ptr)sym(lib, "aclrtSynchronizeStream");
    fn_pptr aclrtCreateEvent = (fn_pptr)sym(lib, "aclrtCreateEvent");
    fn_pptr_u32 aclrtCreateEventExWithFlag = (fn_pptr_u32)sym(lib, "aclrtCreateEventExWithFlag");
    fn_ptr_ptr aclrtRecordEvent = (fn_ptr_ptr)sym(lib, "aclrtRecordEvent");
    query = (fn_ptr_pi32)sym(lib, "aclrtQueryEventStatus");

    setvbuf(stdout, NULL, _IONBF, 0);
    CALL(aclInit(NULL), "aclInit");
    CALL(aclrtSetDevice(0), "aclrtSetDevice");
    void *s = NULL, *deflt = NULL, *timeline = NULL, *plain = NULL;
    CALL(aclrtCreateStream(&s), "aclrtCreateStream");
    CALL(aclrtCreateEvent(&deflt), "aclrtCreateEvent");
    CALL(aclrtCreateEventExWithFlag(&timeline, 0x8), "aclrtCreateEventExWithFlag(TIME_LINE)");
    CALL(aclrtCreateEventExWithFlag(&plain, 0x1), "aclrtCreateEventExWithFlag(SYNC)");
    for (int round = 0; round < 2; round++) {
        CALL(aclrtRecordEvent(deflt, s), "aclrtRecordEvent");
        CALL(aclrtRecordEvent(timeline, s), "aclrtRecordEvent");
        CALL(aclrtRecordEvent(plain, s), "aclrtRecordEvent");
        usleep(300 * 1000); /* the emulation runs the records at once: long done by now */
        printf("round %d, after the records ran, before any synchronize\n", round);
        ask("  default event  ", deflt, 4);
        ask("  TIME_LINE event", timeline, 4);
        ask("  SYNC event     ", plain, 4);
        CALL(aclrtSynchronizeStream(s), "aclrtSynchronizeStream");
        printf("round %d, after aclrtSynchronizeStream\n", round);
        ask("  default event  ", deflt, 2);
        ask("  TIME_LINE event", timeline, 2);
        ask("  SYNC event     ", plain, 2);
    }
    printf("done\n");
    fflush(stdout);
    _exit(0);
}
