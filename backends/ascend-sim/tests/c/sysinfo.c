/* A vendor-style ACL program exercising the system-information calls a CANN application makes
 * before and around its work: run mode, package versions, data type sizes and half-precision
 * conversions, the SoC name, the cores of the calling thread, the device's error detail and the
 * synchronous memset, each with its bad inputs. Usage: sysinfo <a2|310p> (the simulated
 * product, for the expected SoC answers). The package versions come from $ASCEND_HOME_PATH,
 * which the test prepares. Prints one line per group and "SYSINFO OK"; exits 1 at the first
 * failure. */
#define _POSIX_C_SOURCE 200809L
#include "acl_sysinfo.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPECT_CODE(call, want)                                                         \
    do {                                                                                \
        aclError got_ = (call);                                                         \
        if (got_ != (want)) {                                                           \
            printf("FAIL %s = %d, want %d (line %d)\n", #call, got_, (want), __LINE__); \
            return 1;                                                                   \
        }                                                                               \
    } while (0)
#define CHECK(call) EXPECT_CODE(call, ACL_SUCCESS)
#define EXPECT(cond, ...)                                                               \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            printf("FAIL line %d: ", __LINE__);                                         \
            printf(__VA_ARGS__);                                                        \
            printf("\n");                                                               \
            return 1;                                                                   \
        }                                                                               \
    } while (0)

static int run_mode(void) {
    aclrtRunMode mode = ACL_DEVICE;
    CHECK(aclrtGetRunMode(&mode));
    EXPECT(mode == ACL_HOST, "run mode %d", (int)mode);
    EXPECT_CODE(aclrtGetRunMode(NULL), ACL_ERROR_INVALID_PARAM);
    printf("run mode ok\n");
    return 0;
}

static int versions(void) {
    char pkg[64];
    char ver[ACL_PKG_VERSION_MAX_SIZE];
    int32_t num = 0;

    strcpy(pkg, "runtime");
    CHECK(aclsysGetVersionStr(pkg, ver));
    EXPECT(strcmp(ver, "8.5.0") == 0, "runtime version '%s'", ver);
    CHECK(aclsysGetVersionNum(pkg, &num));
    EXPECT(num == 80500000, "runtime version number %d", num);
    printf("runtime package %s (%d)\n", ver, num);

    /* The name is retried with '-' for '_'; the value is trimmed; rc.1 counts 100 - 1 below. */
    strcpy(pkg, "opp_kernel");
    CHECK(aclsysGetVersionStr(pkg, ver));
    EXPECT(strcmp(ver, "9.0.0-rc.1") == 0, "opp_kernel version '%s'", ver);
    CHECK(aclsysGetVersionNum(pkg, &num));
    EXPECT(num == 89999901, "opp_kernel number %d", num);

    /* A version the string call returns but the number call cannot parse. */
    strcpy(pkg, "legacy");
    CHECK(aclsysGetVersionStr(pkg, ver));
    EXPECT(strcmp(ver, "8.0.RC3") == 0, "legacy version '%s'", ver);
    EXPECT_CODE(aclsysGetVersionNum(pkg, &num), ACL_ERROR_INTERNAL_ERROR);

    /* Too long for the buffer: 500000 and an empty string. */
    strcpy(pkg, "long");
    ver[0] = 'x';
    EXPECT_CODE(aclsysGetVersionStr(pkg, ver), ACL_ERROR_INTERNAL_ERROR);
    EXPECT(ver[0] == '\0', "buffer not cleared");

    /* No Version= line, no package, no ASCEND_HOME_PATH. */
    strcpy(pkg, "noversion");
    EXPECT_CODE(aclsysGetVersionStr(pkg, ver), ACL_ERROR_INVALID_FILE);
    strcpy(pkg, "absent");
    EXPECT_CODE(aclsysGetVersionStr(pkg, ver), ACL_ERROR_INVALID_FILE);
    EXPECT_CODE(aclsysGetVersionNum(pkg, &num), ACL_ERROR_INVALID_FILE);
    strcpy(pkg, "runtime");
    const char *home = getenv("ASCEND_HOME_PATH");
    EXPECT(home != NULL, "ASCEND_HOME_PATH not set by the test");
    char saved[4096];
    snprintf(saved, sizeof saved, "%s", home);
    unsetenv("ASCEND_HOME_PATH");
    EXPECT_CODE(aclsysGetVersionStr(pkg, ver), ACL_ERROR_INVALID_FILE);
    setenv("ASCEND_HOME_PATH", saved, 1);
    CHECK(aclsysGetVersionStr(pkg, ver));

    /* NULL arguments: the output is checked first. */
    EXPECT_CODE(aclsysGetVersionStr(NULL, ver), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclsysGetVersionStr(pkg, NULL), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclsysGetVersionNum(NULL, &num), ACL_ERROR_INVALID_PARAM);
    EXPECT_CODE(aclsysGetVersionNum(pkg, NULL), ACL_ERROR_INVALID_PARAM);
    printf("versions ok\n");
    return 0;
}

static int data_types(void) {
    EXPECT(aclDataTypeSize(ACL_FLOAT) == 4, "float");
    EXPECT(aclDataTypeSize(ACL_FLOAT16) == 2, "float16");
    EXPECT(aclDataTypeSize(ACL_BF16) == 2, "bf16");
    EXPECT(aclDataTypeSize(ACL_INT8) == 1, "int8");
    EXPECT(aclDataTypeSize(ACL_INT64) == 8, "int64");
    EXPECT(aclDataTypeSize(ACL_COMPLEX128) == 16, "complex128");
    EXPECT(aclDataTypeSize(ACL_COMPLEX32) == 4, "complex32");
    EXPECT(aclDataTypeSize(ACL_INT4) == 1, "int4");
    EXPECT(aclDataTypeSize(ACL_STRING) == 0, "string");
    EXPECT(aclDataTypeSize(ACL_DT_UNDEFINED) == 0, "undefined");
    /* Unknown values fall to the runtime's default of 8. */
    EXPECT(aclDataTypeSize(ACL_FLOAT4_E2M1) == 8, "float4");
    EXPECT(aclDataTypeSize((aclDataType)9999) == 8, "9999");

    EXPECT(aclFloatToFloat16(1.0f) == 0x3C00, "1.0 -> %#x", aclFloatToFloat16(1.0f));
    EXPECT(aclFloat16ToFloat(0x3C00) == 1.0f, "0x3c00");
    EXPECT(aclFloatToFloat16(-2.5f) == 0xC100, "-2.5");
    float third = aclFloat16ToFloat(aclFloatToFloat16(1.0f / 3.0f));
    EXPECT(fabsf(third - 1.0f / 3.0f) < 1.0f / 2048.0f, "1/3 came back as %f", third);
    /* Saturation instead of Inf / NaN, both ways. */
    EXPECT(aclFloatToFloat16(INFINITY) == 0x7BFF, "+inf");
    EXPECT(aclFloatToFloat16(-INFINITY) == 0xFBFF, "-inf");
    EXPECT(aclFloatToFloat16(NAN) == 0x7BFF, "nan");
    EXPECT(aclFloatToFloat16(1.0e6f) == 0x7BFF, "1e6");
    EXPECT(aclFloat16ToFloat(0x7C00) == 65536.0f, "half +inf -> %f", aclFloat16ToFloat(0x7C00));
    EXPECT(aclFloat16ToFloat(0x7E00) == 98304.0f, "half nan");
    EXPECT(aclFloat16ToFloat(0x0001) == ldexpf(1.0f, -24), "smallest subnormal");
    printf("data types ok\n");
    return 0;
}

static int device_calls(int is_a2) {
    uint32_t cores = 0;
    void *dev = NULL;
    /* No current context yet. */
    EXPECT_CODE(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_CUBE_CORE, &cores), ACL_ERROR_RT_CONTEXT_NULL);
    EXPECT_CODE(aclrtMemset(&cores, 4, 0, 4), ACL_ERROR_RT_CONTEXT_NULL);
    CHECK(aclrtSetDevice(0));

    const char *soc = aclrtGetSocName();
    EXPECT(soc != NULL && strcmp(soc, is_a2 ? "Ascend910B1" : "Ascend310P3") == 0, "soc %s",
           soc ? soc : "(null)");
    CHECK(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_CUBE_CORE, &cores));
    EXPECT(cores == (is_a2 ? 24u : 8u), "cube cores %u", cores);
    CHECK(aclrtGetResInCurrentThread(ACL_RT_DEV_RES_VECTOR_CORE, &cores));
    EXPECT(cores == (is_a2 ? 48u : 7u), "vector cores %u", cores);
    EXPECT_CODE(aclrtGetResInCurrentThread((aclrtDevResLimitType)2, &cores), ACL_ERROR_RT_PARAM_INVALID);
    EXPECT_CODE(aclrtGetResInCurrentThread((aclrtDevResLimitType)-1, &cores), ACL_ERROR_RT_PARAM_INVALID);
    /* The NULL check comes before the type check. */
    EXPECT_CODE(aclrtGetResInCurrentThread((aclrtDevResLimitType)2, NULL), ACL_ERROR_INVALID_PARAM);
    printf("soc %s, %u vector cores\n", soc, cores);

    /* Error detail: nothing recorded; only the documented fields are written. */
    aclrtErrorInfo info;
    EXPECT(sizeof info == 2576, "sizeof(aclrtErrorInfo) %zu", sizeof info);
    memset(&info, 0xEE, sizeof info);
    if (is_a2) {
        CHECK(aclrtGetErrorVerbose(0, &info));
        EXPECT(info.tryRepair == 0 && info.hasDetail == 0 && info.errorType == ACL_RT_NO_ERROR,
               "error info %d %d %d", info.tryRepair, info.hasDetail, (int)info.errorType);
        EXPECT(info.detail.aicoreErrType == ACL_RT_AICORE_ERROR_UNKNOWN, "aicore type");
        EXPECT(info.reserved[0] == 0xEE && info.reserved[1] == 0xEE, "reserved bytes written");
        EXPECT_CODE(aclrtGetErrorVerbose(1, &info), ACL_ERROR_RT_INVALID_DEVICEID);
        EXPECT_CODE(aclrtGetErrorVerbose(-1, &info), ACL_ERROR_RT_INVALID_DEVICEID);
    } else {
        EXPECT_CODE(aclrtGetErrorVerbose(0, &info), ACL_ERROR_RT_FEATURE_NOT_SUPPORT);
    }
    EXPECT_CODE(aclrtGetErrorVerbose(0, NULL), ACL_ERROR_INVALID_PARAM);
    printf("error detail ok\n");

    /* Synchronous memset. */
    unsigned char back[64];
    CHECK(aclrtMalloc(&dev, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemset(dev, 64, 0x1AB, 64)); /* only the low byte counts */
    CHECK(aclrtMemcpy(back, 64, dev, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < 64; i++) {
        EXPECT(back[i] == 0xAB, "byte %d = %#x", i, back[i]);
    }
    CHECK(aclrtMemset((char *)dev + 8, 56, 0, 8));
    CHECK(aclrtMemcpy(back, 64, dev, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(back[7] == 0xAB && back[8] == 0 && back[15] == 0 && back[16] == 0xAB, "partial memset");
    EXPECT_CODE(aclrtMemset(dev, 8, 0, 16), ACL_ERROR_RT_PARAM_INVALID);
    CHECK(aclrtMemcpy(back, 64, dev, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(back[0] == 0xAB, "refused memset wrote");
    EXPECT_CODE(aclrtMemset(NULL, 8, 0, 8), ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtMemset(NULL, 0, 0, 0)); /* count 0: nothing checked */

    /* Inside a GLOBAL capture the synchronous memset is refused and the capture stays valid;
     * after switching the thread to RELAXED it runs. */
    aclrtStream s = NULL;
    aclmdlRI ri = NULL;
    aclmdlRICaptureStatus status = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
    CHECK(aclrtCreateStream(&s));
    CHECK(aclmdlRICaptureBegin(s, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    EXPECT_CODE(aclrtMemset(dev, 64, 1, 64), ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT);
    CHECK(aclmdlRICaptureGetInfo(s, &status, &ri));
    EXPECT(status == ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, "capture status %d", (int)status);
    aclmdlRICaptureMode mode = ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
    CHECK(aclmdlRICaptureThreadExchangeMode(&mode));
    CHECK(aclrtMemset(dev, 64, 2, 64));
    CHECK(aclmdlRICaptureThreadExchangeMode(&mode));
    CHECK(aclmdlRICaptureEnd(s, &ri));
    EXPECT(ri != NULL, "no model after the capture");
    CHECK(aclmdlRIDestroy(ri));
    CHECK(aclrtMemcpy(back, 64, dev, 64, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(back[0] == 2 && back[63] == 2, "relaxed memset gave %d", back[0]);
    CHECK(aclrtDestroyStream(s));
    CHECK(aclrtFree(dev));
    printf("memset ok\n");
    return 0;
}

int main(int argc, char **argv) {
    int is_a2 = argc < 2 || strcmp(argv[1], "310p") != 0;
    /* These need no aclInit. */
    if (run_mode() || versions() || data_types()) {
        return 1;
    }
    CHECK(aclInit(NULL));
    if (device_calls(is_a2)) {
        return 1;
    }
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("SYSINFO OK\n");
    return 0;
}
