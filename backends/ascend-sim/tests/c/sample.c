/* A vendor-style ACL program: synchronous copies, a host-func thread, value wait/write between
 * two streams, a configured stream and the exception callback. Prints one line per check and
 * "SAMPLE OK" at the end; exits 1 at the first failure. */
#include "acl_min.h"
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        aclError e_ = (call);                                                         \
        if (e_ != ACL_SUCCESS) {                                                      \
            printf("FAIL %s = %d (line %d)\n", #call, e_, __LINE__);                  \
            return 1;                                                                 \
        }                                                                             \
    } while (0)
#define EXPECT(cond, ...)                                                             \
    do {                                                                              \
        if (!(cond)) {                                                                \
            printf("FAIL " __VA_ARGS__);                                              \
            printf("\n");                                                             \
            return 1;                                                                 \
        }                                                                             \
    } while (0)

static volatile int g_stop = 0;
static int g_hostfunc_runs = 0;
static pthread_t g_host_thread;
static int g_host_thread_ok = 0;
static uint32_t g_exc_task = 0, g_exc_stream = 0, g_exc_code = 0, g_exc_calls = 0;

static void *process_loop(void *arg) {
    (void)arg;
    aclrtSetDevice(0);
    while (!g_stop) {
        aclrtProcessHostFunc(20); /* 507012 on timeout: keep polling */
    }
    return NULL;
}

static void host_func(void *args) {
    g_host_thread_ok = pthread_equal(pthread_self(), g_host_thread);
    g_hostfunc_runs += *(int *)args;
}

static void on_exception(aclrtExceptionInfo *info) {
    g_exc_calls++;
    g_exc_task = aclrtGetTaskIdFromExceptionInfo(info);
    g_exc_stream = aclrtGetStreamIdFromExceptionInfo(info);
    g_exc_code = aclrtGetErrorCodeFromExceptionInfo(info);
}

int main(void) {
    int32_t major = 0, minor = 0, patch = 0;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtGetVersion(&major, &minor, &patch));
    printf("version %d.%d.%d\n", major, minor, patch);

    /* Synchronous copies through device memory. */
    const char msg[] = "hello, device";
    char back[sizeof msg] = {0};
    void *dev = NULL;
    CHECK(aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(dev, 64, msg, sizeof msg, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(back, sizeof back, dev, sizeof msg, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(strcmp(back, msg) == 0, "memcpy round trip gave '%s'", back);
    EXPECT(aclrtMemcpy(back, 4, dev, 8, ACL_MEMCPY_DEVICE_TO_HOST) != ACL_SUCCESS,
           "count > destMax accepted");
    printf("memcpy ok\n");

    /* Host funcs processed by our own thread. */
    aclrtStream s = NULL, waiter = NULL;
    CHECK(aclrtCreateStream(&s));
    CHECK(pthread_create(&g_host_thread, NULL, process_loop, NULL) == 0 ? 0 : -1);
    CHECK(aclrtSubscribeHostFunc((uint64_t)g_host_thread, s));
    int add = 5;
    CHECK(aclrtLaunchHostFunc(s, host_func, &add));
    CHECK(aclrtLaunchHostFunc(s, host_func, &add));
    CHECK(aclrtSynchronizeStream(s));
    EXPECT(g_hostfunc_runs == 10, "host funcs ran %d/10", g_hostfunc_runs);
    EXPECT(g_host_thread_ok, "host func ran on another thread");
    CHECK(aclrtUnSubscribeHostFunc((uint64_t)g_host_thread, s));
    g_stop = 1;
    pthread_join(g_host_thread, NULL);
    printf("hostfunc ok\n");

    /* Value wait on one stream, released by a value write on another; the copy after the wait
     * must see the flag's effect. */
    uint64_t *flag = NULL;
    CHECK(aclrtMalloc((void **)&flag, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    uint64_t zero = 0, seven = 7, got = 0;
    CHECK(aclrtMemcpy(flag, 8, &zero, 8, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtCreateStream(&waiter));
    CHECK(aclrtValueWait(flag, 7, ACL_VALUE_WAIT_EQ, waiter));
    CHECK(aclrtValueWrite(flag + 1, 42, 0, waiter));
    /* Nothing wrote 7 yet: the waiter must still be blocked. */
    aclError blocked = aclrtSynchronizeStreamWithTimeout(waiter, 50);
    EXPECT(blocked == 507046, "waiter not blocked: synchronize gave %d", blocked);
    CHECK(aclrtMemcpy(&got, 8, flag + 1, 8, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(got == 0, "write after the wait ran before the release");
    CHECK(aclrtValueWrite(flag, seven, 0, s));
    CHECK(aclrtSynchronizeStream(waiter));
    CHECK(aclrtMemcpy(&got, 8, flag + 1, 8, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(got == 42, "write after wait gave %llu", (unsigned long long)got);
    EXPECT(aclrtValueWait(flag, 1, 9, waiter) != ACL_SUCCESS, "bad wait flag accepted");
    printf("value ok\n");

    /* A configured stream. */
    aclrtStreamConfigHandle *cfg = aclrtCreateStreamConfigHandle();
    EXPECT(cfg != NULL, "no config handle");
    uint32_t prio = 3, flags = ACL_STREAM_FAST_SYNC;
    CHECK(aclrtSetStreamConfigOpt(cfg, ACL_RT_STREAM_PRIORITY, &prio, sizeof prio));
    CHECK(aclrtSetStreamConfigOpt(cfg, ACL_RT_STREAM_FLAG, &flags, sizeof flags));
    EXPECT(aclrtSetStreamConfigOpt(cfg, ACL_RT_STREAM_PRIORITY, &prio, 1) != ACL_SUCCESS,
           "wrong valueSize accepted");
    aclrtStream v2 = NULL;
    CHECK(aclrtCreateStreamV2(&v2, cfg));
    uint32_t got_prio = 99, got_flags = 99;
    CHECK(aclrtStreamGetPriority(v2, &got_prio));
    CHECK(aclrtStreamGetFlags(v2, &got_flags));
    EXPECT(got_prio == 3 && got_flags == ACL_STREAM_FAST_SYNC, "v2 stream prio %u flags %u",
           got_prio, got_flags);
    CHECK(aclrtDestroyStreamConfigHandle(cfg));
    printf("stream config ok\n");

    /* Exception callback on a device fault (simulator-only fault task). */
    int32_t v2_id = -1;
    CHECK(aclrtStreamGetId(v2, &v2_id));
    CHECK(aclrtSetExceptionInfoCallback(on_exception));
    CHECK(aclrtMemcpy(back, sizeof back, msg, sizeof msg, ACL_MEMCPY_HOST_TO_HOST));
    CHECK(xsimLaunchFault(v2, 507015));
    aclError sync = aclrtSynchronizeStream(v2);
    EXPECT(sync == 507015, "synchronize after fault gave %d", sync);
    EXPECT(g_exc_calls == 1, "exception callback ran %u times", g_exc_calls);
    EXPECT(g_exc_stream == (uint32_t)v2_id && g_exc_task == 1 && g_exc_code == 507015,
           "exception info stream %u task %u code %u", g_exc_stream, g_exc_task, g_exc_code);
    EXPECT(aclrtGetTaskIdFromExceptionInfo(NULL) == 0xFFFFFFFFu, "NULL info");
    printf("exception ok: stream %u task %u code %u\n", g_exc_stream, g_exc_task, g_exc_code);

    CHECK(aclrtSetExceptionInfoCallback(NULL));
    aclrtDestroyStream(v2);
    aclrtDestroyStream(waiter);
    aclrtDestroyStream(s);
    aclrtFree(flag);
    aclrtFree(dev);
    aclrtResetDevice(0);
    aclFinalize();
    printf("SAMPLE OK\n");
    return 0;
}
