// SPDX-License-Identifier: MIT
// pool: a fixed set of worker threads for fork-join jobs. The caller publishes (fn, ctx) and
// bumps a generation counter; each slot ith = 1..nth-1 is claimed (once per generation) and run
// by its worker, and the caller runs slot 0. A caller that finishes first runs the slots whose
// workers have not claimed them yet, so a worker the OS has not scheduled (busy host, VM steal,
// futex wake-up latency) delays nothing; partitions stay static (slot ith is always the same
// share), only the thread that executes a slot varies. Waits spin briefly (decode issues
// hundreds of small jobs per token), then sleep on a futex; sleepers are counted so that a run
// whose workers are all spinning makes no system call. One run at a time (asserted).
#include "kernels/kernels.h"

#include "base/base.h"
#include "base/host.h"

#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

// Spin iterations (each a pause, ~10-60 ns) before sleeping: about 50-300 us, longer than the
// gap between two matmuls of one decode step, shorter than a scheduler tick.
#define POOL_SPIN 4096

struct pool_slot {
    _Alignas(64) _Atomic uint32_t claimed_gen; // last generation this slot was claimed for
};

struct gl_pool {
    int n_threads;
    pthread_t *threads;
    int n_started;
    struct pool_slot *slots; // [n_threads]; slot 0 (the caller's) unused
    gl_pool_fn fn;           // job of the current generation; written before gen is bumped
    void *ctx;
    _Alignas(64) _Atomic uint32_t gen; // futex word workers sleep on
    _Atomic int n_sleeping_workers;
    _Atomic int stop;
    _Alignas(64) _Atomic uint32_t n_done; // slots 1..nth-1 finished; futex word of the caller
    _Atomic int caller_sleeping;
    _Atomic int busy;
};

struct pool_worker_arg {
    struct gl_pool *p;
    int ith;
};

static void futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
    // Returns at once if *addr != val; spurious wake-ups are handled by the callers' loops.
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

// Claims slot s for generation g; fails if it was already claimed for g or a later generation
// (serial-number order, so the 32-bit counter may wrap). A worker holding a stale g therefore
// never runs a slot of a newer job, and generation g cannot end while its slot is unclaimed, so
// a successful claim always belongs to the job currently published.
static int slot_claim(struct pool_slot *s, uint32_t g)
{
    uint32_t old = atomic_load(&s->claimed_gen);
    while ((int32_t)(g - old) > 0)
        if (atomic_compare_exchange_weak(&s->claimed_gen, &old, g))
            return 1;
    return 0;
}

// Counts a finished slot; the last one wakes a sleeping caller.
static void slot_done(struct gl_pool *p)
{
    // seq_cst: orders against the caller's store to caller_sleeping before it reads n_done.
    uint32_t done = atomic_fetch_add(&p->n_done, 1) + 1;
    if (done == (uint32_t)(p->n_threads - 1) && atomic_load(&p->caller_sleeping))
        futex_wake_all(&p->n_done);
}

// Waits until gen differs from seen; returns the new value.
static uint32_t worker_wait(struct gl_pool *p, uint32_t seen)
{
    for (int i = 0; i < POOL_SPIN; i++) {
        uint32_t g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen)
            return g;
        cpu_relax();
    }
    for (;;) {
        atomic_fetch_add(&p->n_sleeping_workers, 1);
        uint32_t g = atomic_load(&p->gen);
        if (g == seen)
            futex_wait(&p->gen, seen);
        atomic_fetch_sub(&p->n_sleeping_workers, 1);
        g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen)
            return g;
    }
}

static void *worker_main(void *arg)
{
    struct pool_worker_arg a = *(struct pool_worker_arg *)arg;
    gl_free(arg);
    struct gl_pool *p = a.p;
    uint32_t seen = 0;
    for (;;) {
        seen = worker_wait(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire))
            return NULL;
        if (!slot_claim(&p->slots[a.ith], seen))
            continue; // the caller ran this slot already
        p->fn(p->ctx, a.ith, p->n_threads);
        slot_done(p);
    }
}

struct gl_pool *gl_pool_new(int n_threads)
{
    if (n_threads < 1 || n_threads > 1024)
        return NULL;
    struct gl_pool *p = gl_calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->n_threads = n_threads;
    atomic_init(&p->gen, 0);
    atomic_init(&p->n_sleeping_workers, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->n_done, 0);
    atomic_init(&p->caller_sleeping, 0);
    atomic_init(&p->busy, 0);
    if (n_threads > 1) {
        p->threads = gl_calloc((size_t)n_threads - 1, sizeof *p->threads);
        p->slots = gl_malloc_aligned((size_t)n_threads * sizeof *p->slots);
        if (p->threads == NULL || p->slots == NULL) {
            gl_free(p->threads);
            gl_free_aligned(p->slots);
            gl_free(p);
            return NULL;
        }
        for (int i = 0; i < n_threads; i++)
            atomic_init(&p->slots[i].claimed_gen, 0);
    }
    for (int i = 1; i < n_threads; i++) {
        struct pool_worker_arg *a = gl_malloc(sizeof *a);
        if (a == NULL)
            goto fail;
        a->p = p;
        a->ith = i;
        int rc = pthread_create(&p->threads[i - 1], NULL, worker_main, a);
        if (rc != 0) {
            GL_LOGE("pool: pthread_create for worker %d of %d failed: errno %d", i, n_threads, rc);
            gl_free(a);
            goto fail;
        }
        p->n_started++;
    }
    return p;
fail:
    gl_pool_delete(p);
    return NULL;
}

int gl_pool_pin(struct gl_pool *p, const int32_t *cpus, int n)
{
    int pinned = 0;
    for (int i = 1; i < p->n_threads && i < n; i++) {
        if (cpus[i] < 0)
            continue;
        int rc = gl_host_pin_thread(p->threads[i - 1], cpus[i]);
        if (rc != 0 && pinned == 0)
            GL_LOGW("pool: cannot pin worker %d to cpu %d: errno %d", i, (int)cpus[i], rc);
        pinned += rc == 0;
    }
    return pinned;
}

void gl_pool_delete(struct gl_pool *p)
{
    if (p == NULL)
        return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    futex_wake_all(&p->gen);
    for (int i = 0; i < p->n_started; i++)
        pthread_join(p->threads[i], NULL);
    gl_free(p->threads);
    gl_free_aligned(p->slots);
    gl_free(p);
}

int gl_pool_size(const struct gl_pool *p)
{
    return p != NULL ? p->n_threads : 1;
}

void gl_pool_run(struct gl_pool *p, gl_pool_fn fn, void *ctx)
{
    if (p == NULL || p->n_threads == 1) {
        fn(ctx, 0, 1);
        return;
    }
    GL_ASSERT_MSG(atomic_exchange(&p->busy, 1) == 0, "pool: gl_pool_run re-entered");
    const int nth = p->n_threads;
    const uint32_t want = (uint32_t)(nth - 1);
    p->fn = fn;
    p->ctx = ctx;
    atomic_store_explicit(&p->n_done, 0, memory_order_relaxed);
    // seq_cst: publishes fn/ctx/n_done and orders against the n_sleeping_workers read below.
    uint32_t g = atomic_fetch_add(&p->gen, 1) + 1;
    if (atomic_load(&p->n_sleeping_workers) > 0)
        futex_wake_all(&p->gen);

    fn(ctx, 0, nth);
    for (int i = 1; i < nth; i++) {
        if (slot_claim(&p->slots[i], g)) {
            fn(ctx, i, nth);
            slot_done(p);
        }
    }

    for (int i = 0; i < POOL_SPIN; i++) {
        if (atomic_load_explicit(&p->n_done, memory_order_acquire) == want)
            goto done;
        cpu_relax();
    }
    for (;;) {
        atomic_store(&p->caller_sleeping, 1);
        uint32_t d = atomic_load(&p->n_done);
        if (d != want)
            futex_wait(&p->n_done, d);
        atomic_store(&p->caller_sleeping, 0);
        if (atomic_load_explicit(&p->n_done, memory_order_acquire) == want)
            break;
    }
done:
    atomic_store_explicit(&p->busy, 0, memory_order_release);
}
