// SPDX-License-Identifier: MIT
// base/host: what this process may use of the machine -- CPU cores and free memory -- for the
// real-machine defaults of the engine (kernel threads, pinning) and the KV pool size.
// The decisions are pure functions over the text of the kernel's files (sysfs topology, cgroup v1
// and v2 limits, /proc/meminfo), so they are unit-tested on synthetic input; gl_host_cpus and
// gl_host_mem_available read the real files. Nothing here allocates; errors are not possible
// (missing or malformed files mean "no information", never a failure).
#pragma once

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define GL_HOST_MAX_CPUS 1024

// Parses a kernel cpu list ("0-3,8,10-11\n") into set[0..max_cpu) (set[i] = 1 for listed cpus;
// others untouched). Returns the number of cpus listed, or -1 for malformed text or an id >=
// max_cpu.
int gl_host_parse_cpulist(const char *s, uint8_t *set, int max_cpu);

// The CPU quota as whole cpus: floor(quota / period), at least 1; 0 means no limit. cgroup v2
// cpu.max is "max 100000" or "150000 100000"; v1 is cpu.cfs_quota_us ("-1" = none) and
// cpu.cfs_period_us. Any argument may be NULL (file absent); v2 wins when it sets a limit.
int gl_host_cpu_quota(const char *v2_cpu_max, const char *v1_quota, const char *v1_period);

// The cpus to run kernel threads on: one per physical core (the lowest allowed cpu of each core,
// SMT siblings dropped), in increasing order, at most quota (0: no cap) and at most cap.
// allowed[0..n_cpu): the affinity mask; siblings[i]: cpu i's thread_siblings_list text, or NULL
// (unknown: cpu i is its own core). Returns the count (>= 1 when any cpu is allowed).
int gl_host_pick_cpus(const uint8_t *allowed, int n_cpu, const char *const *siblings, int quota,
                      int32_t *out, int cap);

// Bytes this process may still allocate: MemAvailable of meminfo (text of /proc/meminfo), capped
// by the cgroup's room: v2 memory.max minus the working set (memory.current less memory.stat's
// inactive_file, the page cache the kernel reclaims first, as Kubernetes counts it; limit "max":
// no cap), or v1 memory.limit_in_bytes minus memory.usage_in_bytes less total_inactive_file.
// Any text may be NULL. -1 when meminfo has no MemAvailable and no cgroup limit is set.
int64_t gl_host_mem_room(const char *meminfo, const char *cg_limit, const char *cg_usage,
                         const char *cg_stat);

struct gl_host_cpus {
    int32_t n;                      // >= 1
    int32_t cpus[GL_HOST_MAX_CPUS]; // [n] cpu ids, one per physical core
    int32_t n_allowed, n_quota;     // cpus in the affinity mask; the quota (0: none)
    char why[160];                  // one line for the start-up log
};
// The process's cores, detected once (thread-safe); never NULL.
const struct gl_host_cpus *gl_host_cpus(void);

// Bytes of a model on disk: a file's size, or the sum over a folder's *.safetensors files; 0 when
// unreadable. (What mmapped weights will keep resident: MemAvailable counts page cache as free.)
int64_t gl_host_model_bytes(const char *path);

// Pins thread t to cpu (pthread_setaffinity_np); 0, or the errno (cpu < 0 or out of range:
// EINVAL, nothing changed).
int gl_host_pin_thread(pthread_t t, int cpu);

// gl_host_mem_room over the real files, read now. GLINT_MEM_AVAILABLE=BYTES caps it (tests, and a
// way to keep glint's KV pool below what the machine has free).
int64_t gl_host_mem_available(void);
