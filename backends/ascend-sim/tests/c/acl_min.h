/* Minimal declarations of the public ACL runtime API used by sample.c, written for this
 * repository from the public prototypes (acl_base.h / acl_rt.h of the CANN runtime). Only what
 * the sample calls; values and prototypes follow the vendor headers. */
#ifndef XSTREAM_ACL_MIN_H
#define XSTREAM_ACL_MIN_H
#include <stddef.h>
#include <stdint.h>

typedef int aclError;
typedef void *aclrtStream;
typedef void *aclrtContext;
typedef struct rtExceptionInfo aclrtExceptionInfo;
typedef void (*aclrtHostFunc)(void *args);
typedef void (*aclrtExceptionInfoCallback)(aclrtExceptionInfo *exceptionInfo);

typedef enum aclrtMemcpyKind {
    ACL_MEMCPY_HOST_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_DEVICE_TO_DEVICE,
} aclrtMemcpyKind;

typedef enum aclrtMemMallocPolicy { ACL_MEM_MALLOC_HUGE_FIRST } aclrtMemMallocPolicy;

typedef enum {
    ACL_RT_STREAM_WORK_ADDR_PTR = 0,
    ACL_RT_STREAM_WORK_SIZE,
    ACL_RT_STREAM_FLAG,
    ACL_RT_STREAM_PRIORITY,
} aclrtStreamConfigAttr;

typedef struct aclrtStreamConfigHandle {
    void *workptr;
    size_t workSize;
    size_t flag;
    uint32_t priority;
} aclrtStreamConfigHandle;

#define ACL_SUCCESS 0
#define ACL_STREAM_FAST_SYNC 0x00000002U
#define ACL_VALUE_WAIT_GEQ 0x0U
#define ACL_VALUE_WAIT_EQ 0x1U

aclError aclInit(const char *configPath);
aclError aclFinalize();
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtResetDevice(int32_t deviceId);
aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t *patchVersion);
aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
aclError aclrtFree(void *devPtr);
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind);
aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtDestroyStream(aclrtStream stream);
aclError aclrtSynchronizeStream(aclrtStream stream);
aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout);
aclError aclrtStreamGetId(aclrtStream stream, int32_t *streamId);
aclError aclrtStreamGetFlags(aclrtStream stream, uint32_t *flags);
aclError aclrtStreamGetPriority(aclrtStream stream, uint32_t *priority);
aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void *args);
aclError aclrtSubscribeHostFunc(uint64_t hostFuncThreadId, aclrtStream exeStream);
aclError aclrtProcessHostFunc(int32_t timeout);
aclError aclrtUnSubscribeHostFunc(uint64_t hostFuncThreadId, aclrtStream exeStream);
aclError aclrtSetExceptionInfoCallback(aclrtExceptionInfoCallback callback);
uint32_t aclrtGetTaskIdFromExceptionInfo(const aclrtExceptionInfo *info);
uint32_t aclrtGetStreamIdFromExceptionInfo(const aclrtExceptionInfo *info);
uint32_t aclrtGetThreadIdFromExceptionInfo(const aclrtExceptionInfo *info);
uint32_t aclrtGetDeviceIdFromExceptionInfo(const aclrtExceptionInfo *info);
uint32_t aclrtGetErrorCodeFromExceptionInfo(const aclrtExceptionInfo *info);
aclError aclrtValueWait(void *devAddr, uint64_t value, uint32_t flag, aclrtStream stream);
aclError aclrtValueWrite(void *devAddr, uint64_t value, uint32_t flag, aclrtStream stream);
aclrtStreamConfigHandle *aclrtCreateStreamConfigHandle(void);
aclError aclrtSetStreamConfigOpt(aclrtStreamConfigHandle *handle, aclrtStreamConfigAttr attr,
                                 const void *attrValue, size_t valueSize);
aclError aclrtCreateStreamV2(aclrtStream *stream, const aclrtStreamConfigHandle *handle);
aclError aclrtDestroyStreamConfigHandle(aclrtStreamConfigHandle *handle);

/* Simulator-only extension (NOT part of ACL): a task that raises a device fault when it runs. */
aclError xsimLaunchFault(aclrtStream stream, aclError code);
#endif
