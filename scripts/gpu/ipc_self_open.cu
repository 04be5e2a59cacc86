// ipc_self_open.cu: does a process that opens its own IPC memory handle (which the driver
// refuses) end cleanly under compute-sanitizer memcheck, with no xstream code involved?
// Build: nvcc -O2 -o ipc_self_open ipc_self_open.cu -lcuda
// Usage: ipc_self_open [open]   (without "open": export only, the control case)
// Prints each call's result; exit 0 when every expectation held.
#include <cuda.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    int do_open = argc > 1 && strcmp(argv[1], "open") == 0;
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    CUipcMemHandle h;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuMemAlloc(&p, 4096)) {
        printf("setup failed\n");
        return 1;
    }
    CUresult r = cuIpcGetMemHandle(&h, p);
    printf("cuIpcGetMemHandle -> %d\n", (int)r);
    if (do_open) {
        CUdeviceptr q = 0;
        CUresult o = cuIpcOpenMemHandle(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
        printf("cuIpcOpenMemHandle in the exporting process -> %d\n", (int)o);
        if (o == CUDA_SUCCESS) cuIpcCloseMemHandle(q);
    }
    printf("cuMemFree -> %d\n", (int)cuMemFree(p));
    printf("cuDevicePrimaryCtxRelease -> %d\n", (int)cuDevicePrimaryCtxRelease(dev));
    printf("END reached\n");
    return r == CUDA_SUCCESS ? 0 : 2;
}
