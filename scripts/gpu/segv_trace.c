/* segv_trace.c: an LD_PRELOAD library that reports where a process dies of SIGSEGV / SIGBUS,
 * for GPU machines without gdb (scripts/gpu/run19.sh, issue 29's two-GPU IPC crash).
 *
 *   gcc -O1 -g -fPIC -shared -o /tmp/segv_trace.so scripts/gpu/segv_trace.c -ldl
 *   LD_PRELOAD=/tmp/segv_trace.so some-program ...      (children inherit it)
 *
 * On the signal it writes to stderr: the pid, the faulting address, the thread's name, then
 * one line per frame of the faulting thread's stack: the return address, the object it lies
 * in, that object's load base, the offset inside it and the nearest exported symbol. Symbolize
 * an offset of a Rust binary here with `addr2line -f -C -e <the unstripped binary> 0x<offset>`
 * (for a position-independent executable the offset is the address to look up). Then the
 * signal is re-raised with the default action, so the exit status stays "signal 11".
 * With SEGV_TRACE_ALL set in the environment, the faulting thread first sends SIGUSR2 to every
 * other thread of the process, and each prints its own stack ("other" lines): what the other
 * threads were doing at the fault (a diagnosis aid; the handlers are not async-signal-safe).
 *
 * The handler is installed from a constructor, so it is in place before `main`: Rust's
 * runtime installs its own stack-overflow handler only where the handler is still the
 * default, and leaves this one alone. It runs on an alternate stack of its own (a stack
 * overflow is reported too). The library is a diagnostic tool; nothing in the repository
 * links it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>

static char alt_stack[1 << 16];

static void print_frames(const char *who) {
    char name[32] = {0};
    prctl(PR_GET_NAME, name, 0, 0, 0);
    void *frames[64];
    int n = backtrace(frames, 64);
    fprintf(stderr, "segv_trace: %s thread '%s' tid %ld\n", who, name, (long)syscall(SYS_gettid));
    for (int i = 0; i < n; i++) {
        Dl_info d;
        memset(&d, 0, sizeof d);
        if (dladdr(frames[i], &d) && d.dli_fname) {
            fprintf(stderr, "segv_trace: %s #%02d %p %s base %p offset 0x%lx %s\n", who, i,
                    frames[i], d.dli_fname, d.dli_fbase,
                    (unsigned long)((char *)frames[i] - (char *)d.dli_fbase),
                    d.dli_sname ? d.dli_sname : "?");
        } else {
            fprintf(stderr, "segv_trace: %s #%02d %p ?\n", who, i, frames[i]);
        }
    }
    fflush(stderr);
}

/* SIGUSR2, sent by the faulting thread to every other thread: each prints its own stack, so
 * the report shows what the other threads were doing when the fault happened. */
static void other(int sig) {
    (void)sig;
    print_frames("other");
}

/* Asks every other thread of the process for its stack, then gives them time to print. */
static void dump_others(void) {
    long self = syscall(SYS_gettid);
    DIR *dir = opendir("/proc/self/task");
    if (!dir) return;
    struct dirent *e;
    while ((e = readdir(dir))) {
        long tid = atol(e->d_name);
        if (tid > 0 && tid != self) syscall(SYS_tgkill, getpid(), tid, SIGUSR2);
    }
    closedir(dir);
    usleep(300000);
}

static void report(int sig, siginfo_t *info, void *uctx) {
    (void)uctx;
    char name[32] = {0};
    prctl(PR_GET_NAME, name, 0, 0, 0);
    fprintf(stderr, "\nsegv_trace: pid %d thread '%s' signal %d at address %p\n", (int)getpid(),
            name, sig, info ? info->si_addr : NULL);
    void *frames[64];
    int n = backtrace(frames, 64);
    for (int i = 0; i < n; i++) {
        Dl_info d;
        memset(&d, 0, sizeof d);
        if (dladdr(frames[i], &d) && d.dli_fname) {
            fprintf(stderr, "segv_trace: #%02d %p %s base %p offset 0x%lx %s\n", i, frames[i],
                    d.dli_fname, d.dli_fbase,
                    (unsigned long)((char *)frames[i] - (char *)d.dli_fbase),
                    d.dli_sname ? d.dli_sname : "?");
        } else {
            fprintf(stderr, "segv_trace: #%02d %p ?\n", i, frames[i]);
        }
    }
    fflush(stderr);
    if (getenv("SEGV_TRACE_ALL")) dump_others();
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void segv_trace_init(void) {
    stack_t ss;
    ss.ss_sp = alt_stack;
    ss.ss_size = sizeof alt_stack;
    ss.ss_flags = 0;
    sigaltstack(&ss, NULL);
    /* backtrace() loads libgcc_s on first use: do it now, not inside the handler. */
    void *warm[2];
    backtrace(warm, 2);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = report;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    if (getenv("SEGV_TRACE_ALL")) {
        struct sigaction so;
        memset(&so, 0, sizeof so);
        so.sa_handler = other;
        sigemptyset(&so.sa_mask);
        sigaction(SIGUSR2, &so, NULL);
    }
}
