/* Declarations of the public ACL runtime calls used by sysinfo.c, written for this repository
 * from the public prototypes and enum values of the CANN runtime headers (acl_base_rt.h,
 * acl_rt.h). Only what the program calls. */
#ifndef XSTREAM_ACL_SYSINFO_H
#define XSTREAM_ACL_SYSINFO_H
#include <stddef.h>
#include <stdint.h>

typedef int aclError;
typedef void *aclrtStream;
typedef void *aclmdlRI;
typedef uint16_t aclFloat16;

#define ACL_SUCCESS 0
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_ERROR_INVALID_FILE 100003
#define ACL_ERROR_RT_PARAM_INVALID 107000
#define ACL_ERROR_RT_INVALID_DEVICEID 107001
#define ACL_ERROR_RT_CONTEXT_NULL 107002
#define ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT 107030
#define ACL_ERROR_RT_FEATURE_NOT_SUPPORT 207000
#define ACL_ERROR_INTERNAL_ERROR 500000
#define ACL_PKG_VERSION_MAX_SIZE 128

typedef enum { ACL_DEVICE = 0, ACL_HOST = 1 } aclrtRunMode;
typedef enum { ACL_MEM_MALLOC_HUGE_FIRST = 0 } aclrtMemMallocPolicy;
typedef enum { ACL_MEMCPY_HOST_TO_DEVICE = 1, ACL_MEMCPY_DEVICE_TO_HOST = 2 } aclrtMemcpyKind;
typedef enum { ACL_RT_DEV_RES_CUBE_CORE = 0, ACL_RT_DEV_RES_VECTOR_CORE = 1 } aclrtDevResLimitType;
typedef enum {
    ACL_MODEL_RI_CAPTURE_MODE_GLOBAL = 0,
    ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL = 1,
    ACL_MODEL_RI_CAPTURE_MODE_RELAXED = 2,
} aclmdlRICaptureMode;
typedef enum {
    ACL_MODEL_RI_CAPTURE_STATUS_NONE = 0,
    ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE = 1,
    ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED = 2,
} aclmdlRICaptureStatus;

typedef enum {
    ACL_DT_UNDEFINED = -1,
    ACL_FLOAT = 0,
    ACL_FLOAT16 = 1,
    ACL_INT8 = 2,
    ACL_INT64 = 9,
    ACL_STRING = 13,
    ACL_COMPLEX128 = 17,
    ACL_BF16 = 27,
    ACL_INT4 = 29,
    ACL_COMPLEX32 = 33,
    ACL_FLOAT4_E2M1 = 40,
} aclDataType;

/* aclrtErrorInfo and its parts, laid out as the runtime header declares them. */
typedef struct {
    void *addr;
    size_t len;
    size_t reserved[14];
} aclrtMemUceInfo;
typedef struct {
    size_t arraySize;
    aclrtMemUceInfo memUceInfoArray[20];
} aclrtMemUceInfoArray;
typedef enum { ACL_RT_NO_ERROR = 0, ACL_RT_ERROR_MEMORY = 1, ACL_RT_ERROR_OTHERS = 0xFFFF } aclrtErrorType;
typedef enum { ACL_RT_AICORE_ERROR_UNKNOWN = 0 } aclrtAicoreErrorType;
typedef union {
    aclrtMemUceInfoArray uceInfo;
    aclrtAicoreErrorType aicoreErrType;
} aclrtErrorInfoDetail;
typedef struct {
    uint8_t tryRepair;
    uint8_t hasDetail;
    uint8_t reserved[2];
    aclrtErrorType errorType;
    aclrtErrorInfoDetail detail;
} aclrtErrorInfo;

aclError aclInit(const char *configPath);
aclError aclFinalize(void);
aclError aclrtSetDevice(int32_t deviceId);
aclError aclrtResetDevice(int32_t deviceId);
aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
aclError aclrtFree(void *devPtr);
aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind);
aclError aclrtCreateStream(aclrtStream *stream);
aclError aclrtDestroyStream(aclrtStream stream);
aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode);
aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus *status, aclmdlRI *modelRI);
aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI);
aclError aclmdlRICaptureThreadExchangeMode(aclmdlRICaptureMode *mode);
aclError aclmdlRIDestroy(aclmdlRI modelRI);

aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count);
aclError aclrtGetRunMode(aclrtRunMode *runMode);
aclError aclsysGetVersionStr(char *pkgName, char *versionStr);
aclError aclsysGetVersionNum(char *pkgName, int32_t *versionNum);
size_t aclDataTypeSize(aclDataType dataType);
float aclFloat16ToFloat(aclFloat16 value);
aclFloat16 aclFloatToFloat16(float value);
aclError aclrtGetResInCurrentThread(aclrtDevResLimitType type, uint32_t *value);
aclError aclrtGetErrorVerbose(int32_t deviceId, aclrtErrorInfo *errorInfo);
const char *aclrtGetSocName(void);
#endif
