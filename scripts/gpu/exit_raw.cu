// exit_raw.cu: a plain CUDA program (no xstream) that does what the test binaries do before
// they exit (streams, kernels, host functions, page-locked and stream-ordered memory, a module
// of its own kernels, a second thread that queries a stream), then returns from main with the
// work done. Run many times under compute-sanitizer memcheck to see whether a process of the
// driver alone dies at exit on this machine (scripts/gpu/exit-raw.sh).
//   nvcc -O2 -o exit_raw scripts/gpu/exit_raw.cu -lcuda -lpthread
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); exit(2); } } while (0)

__global__ void fill(unsigned *p, unsigned v, size_t n) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) p[i] = v + (unsigned)i;
}

static void CUDART_CB host_fn(void *arg) { __atomic_fetch_add((int *)arg, 1, __ATOMIC_SEQ_CST); }

static volatile int stop_poll = 0;
static cudaStream_t polled;
static void *poller(void *unused) {
    (void)unused;
    while (!stop_poll) { (void)cudaStreamQuery(polled); usleep(100); }
    return NULL;
}

int main(int argc, char **argv) {
    int leave_poller = argc > 1 && argv[1][0] == 'p';
    CK(cudaSetDevice(0));
    const size_t n = 1 << 20;
    static int fired = 0;
    cudaStream_t s[4];
    for (int i = 0; i < 4; i++) CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    polled = s[0];
    pthread_t th;
    pthread_create(&th, NULL, poller, NULL);
    unsigned *d, *h;
    CK(cudaMalloc(&d, n * 4));
    CK(cudaMallocHost(&h, n * 4));
    for (int round = 0; round < 200; round++) {
        cudaStream_t st = s[round % 4];
        fill<<<(n + 255) / 256, 256, 0, st>>>(d, round, n);
        CK(cudaLaunchHostFunc(st, host_fn, &fired));
        unsigned *a;
        CK(cudaMallocAsync(&a, 4096, st));
        CK(cudaMemcpyAsync(a, d, 4096, cudaMemcpyDeviceToDevice, st));
        CK(cudaMemcpyAsync(h, a, 4096, cudaMemcpyDeviceToHost, st));
        CK(cudaFreeAsync(a, st));
    }
    cudaEvent_t ev;
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CK(cudaEventRecord(ev, s[1]));
    CK(cudaStreamWaitEvent(s[2], ev, 0));
    CK(cudaLaunchHostFunc(s[3], host_fn, &fired));
    CK(cudaDeviceSynchronize());
    if (!leave_poller) { stop_poll = 1; pthread_join(th, NULL); }
    CK(cudaEventDestroy(ev));
    for (int i = 1; i < 4; i++) CK(cudaStreamDestroy(s[i]));
    CK(cudaFreeHost(h));
    CK(cudaFree(d));
    printf("exit_raw: %d host functions ran, poller %s\n", fired, leave_poller ? "left running" : "joined");
    return fired == 201 ? 0 : 3;
}
