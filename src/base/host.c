// SPDX-License-Identifier: MIT
// base/host: cores and memory this process may use (host.h). The readers take small files only
// (sysfs, cgroup, meminfo: a few KiB), and every parser treats its text as untrusted: a malformed
// file is ignored, never trusted half-way.
#define _GNU_SOURCE // sched_getaffinity, CPU_* macros
#include "base/host.h"

#include "base/base.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int gl_host_parse_cpulist(const char *s, uint8_t *set, int max_cpu)
{
    if (!s)
        return -1;
    int n = 0;
    const char *p = s;
    while (*p && *p != '\n') {
        char *end;
        errno = 0;
        long a = strtol(p, &end, 10), b;
        if (end == p || errno || a < 0 || a >= max_cpu || *p == '-' || *p == '+')
            return -1;
        p = end;
        b = a;
        if (*p == '-') {
            const char *q = p + 1;
            b = strtol(q, &end, 10);
            if (end == q || errno || b < a || b >= max_cpu || *q == '-' || *q == '+')
                return -1;
            p = end;
        }
        for (long i = a; i <= b; i++, n++)
            set[i] = 1;
        if (*p == ',')
            p++;
        else if (*p && *p != '\n')
            return -1;
    }
    return n;
}

// A whole decimal integer at s (leading spaces allowed, trailing whitespace allowed); 0 on
// success.
static int parse_i64(const char *s, int64_t *out)
{
    if (!s)
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno)
        return -1;
    while (*end && isspace((unsigned char)*end))
        end++;
    if (*end)
        return -1;
    *out = v;
    return 0;
}

int gl_host_cpu_quota(const char *v2, const char *v1_quota, const char *v1_period)
{
    int64_t q = 0, per = 0;
    char qs[32] = {0};
    long long pv = 0;
    // v2 "max 100000" (no limit: "max" is not a number) or "150000 100000".
    int v2_set =
        v2 && sscanf(v2, "%31s %lld", qs, &pv) == 2 && parse_i64(qs, &q) == 0 && q > 0 && pv > 0;
    if (v2_set)
        per = pv;
    else if (parse_i64(v1_quota, &q) != 0 || q <= 0 || parse_i64(v1_period, &per) != 0 || per <= 0)
        return 0; // v1 quota -1: no limit
    int64_t n = q / per;
    return n < 1 ? 1 : n > GL_HOST_MAX_CPUS ? GL_HOST_MAX_CPUS : (int)n;
}

int gl_host_pick_cpus(const uint8_t *allowed, int n_cpu, const char *const *siblings, int quota,
                      int32_t *out, int cap)
{
    uint8_t core_taken[GL_HOST_MAX_CPUS] = {0}; // by the core's first sibling id
    int n = 0;
    if (n_cpu > GL_HOST_MAX_CPUS)
        n_cpu = GL_HOST_MAX_CPUS;
    for (int c = 0; c < n_cpu && n < cap && (quota <= 0 || n < quota); c++) {
        if (!allowed[c])
            continue;
        int core = c; // the core's id: the lowest cpu in its siblings list
        uint8_t sib[GL_HOST_MAX_CPUS] = {0};
        if (siblings && siblings[c] && gl_host_parse_cpulist(siblings[c], sib, n_cpu) > 0 &&
            sib[c]) {
            for (int j = 0; j < n_cpu; j++)
                if (sib[j]) {
                    core = j;
                    break;
                }
        }
        if (core_taken[core])
            continue; // an SMT sibling of a core already chosen
        core_taken[core] = 1;
        out[n++] = c;
    }
    return n;
}

// "KEY: N kB" (meminfo, unit 1024) or "KEY N" (cgroup memory.stat, unit 1) at a line start; -1
// if absent or malformed.
static int64_t text_field(const char *text, const char *key, char sep, int64_t unit)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, key, kl) == 0 && p[kl] == sep) {
            long long v;
            if (sscanf(p + kl + 1, " %lld", &v) == 1 && v >= 0 && v <= INT64_MAX / unit)
                return (int64_t)v * unit;
            return -1;
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return -1;
}

int64_t gl_host_mem_room(const char *meminfo, const char *cg_limit, const char *cg_usage,
                         const char *cg_stat)
{
    int64_t room = meminfo ? text_field(meminfo, "MemAvailable", ':', 1024) : -1;
    int64_t lim, use = 0;
    // "max" (v2) or a huge v1 value (no limit: 2^63 rounded to pages) parse as no limit.
    if (parse_i64(cg_limit, &lim) == 0 && lim > 0 && lim < ((int64_t)1 << 60)) {
        if (parse_i64(cg_usage, &use) != 0 || use < 0)
            use = 0;
        int64_t cache = cg_stat ? text_field(cg_stat, "inactive_file", ' ', 1) : -1;
        if (cache < 0 && cg_stat)
            cache = text_field(cg_stat, "total_inactive_file", ' ', 1); // v1
        if (cache > 0)
            use = cache < use ? use - cache : 0;
        int64_t cg = lim > use ? lim - use : 0;
        if (room < 0 || cg < room)
            room = cg;
    }
    return room;
}

// ---- the real files ----

// The first line-ish of a small file into buf (NUL-terminated); NULL if unreadable.
static const char *slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return n > 0 ? buf : NULL;
}

// The process's cgroup v2 directory ("/sys/fs/cgroup" + the "0::" path of /proc/self/cgroup).
static void cgroup_dir(char *out, size_t cap)
{
    char buf[4096];
    snprintf(out, cap, "/sys/fs/cgroup");
    if (!slurp("/proc/self/cgroup", buf, sizeof buf))
        return;
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        if (strncmp(line, "0::", 3) == 0 && line[3] == '/' && !strstr(line, "..")) {
            snprintf(out, cap, "/sys/fs/cgroup%s", strcmp(line + 3, "/") ? line + 3 : "");
            return;
        }
        line = nl ? nl + 1 : NULL;
    }
}

// The first of dir/name, /sys/fs/cgroup/name that reads (a container sees its own cgroup at the
// root; a systemd service sees its path under it).
static const char *cg_file(const char *dir, const char *name, char *buf, size_t cap)
{
    char path[4352];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    const char *t = slurp(path, buf, cap);
    if (!t) {
        snprintf(path, sizeof path, "/sys/fs/cgroup/%s", name);
        t = slurp(path, buf, cap);
    }
    return t;
}

static struct gl_host_cpus g_cpus;
static pthread_once_t g_cpus_once = PTHREAD_ONCE_INIT;
static char g_sib_text[GL_HOST_MAX_CPUS][32];

static void detect_cpus(void)
{
    cpu_set_t set;
    uint8_t allowed[GL_HOST_MAX_CPUS] = {0};
    int n_cpu = 0;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE && c < GL_HOST_MAX_CPUS; c++)
            if (CPU_ISSET(c, &set)) {
                allowed[c] = 1;
                n_cpu = c + 1;
                g_cpus.n_allowed++;
            }
    }
    const char *sib[GL_HOST_MAX_CPUS] = {0};
    for (int c = 0; c < n_cpu; c++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list",
                 c);
        if (allowed[c])
            sib[c] = slurp(path, g_sib_text[c], sizeof g_sib_text[c]);
    }
    char dir[4096], b1[128], b2[128], b3[128];
    cgroup_dir(dir, sizeof dir);
    const char *v1q = slurp("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", b2, sizeof b2);
    const char *v1p = slurp("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", b3, sizeof b3);
    if (!v1q) {
        v1q = slurp("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", b2, sizeof b2);
        v1p = slurp("/sys/fs/cgroup/cpu/cpu.cfs_period_us", b3, sizeof b3);
    }
    g_cpus.n_quota = gl_host_cpu_quota(cg_file(dir, "cpu.max", b1, sizeof b1), v1q, v1p);
    g_cpus.n =
        gl_host_pick_cpus(allowed, n_cpu, sib, g_cpus.n_quota, g_cpus.cpus, GL_HOST_MAX_CPUS);
    if (g_cpus.n < 1) { // no affinity information: one unpinned thread's worth
        g_cpus.n = 1;
        g_cpus.cpus[0] = -1;
    }
    char quota[32] = "none";
    if (g_cpus.n_quota > 0)
        snprintf(quota, sizeof quota, "%d cpus", g_cpus.n_quota);
    snprintf(g_cpus.why, sizeof g_cpus.why,
             "%d physical cores (%d cpus in the affinity mask, SMT siblings dropped; cgroup "
             "quota: %s)",
             g_cpus.n, g_cpus.n_allowed, quota);
}

const struct gl_host_cpus *gl_host_cpus(void)
{
    pthread_once(&g_cpus_once, detect_cpus);
    return &g_cpus;
}

// GLINT_MEM_AVAILABLE: bytes, optionally with K, M or G (powers of 1024); -1 if unset or bad.
static int64_t env_cap(void)
{
    const char *e = getenv("GLINT_MEM_AVAILABLE");
    if (!e || !*e)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(e, &end);
    double mul = *end == 'K' ? 0x1p10 : *end == 'M' ? 0x1p20 : *end == 'G' ? 0x1p30 : 1.0;
    if (end == e || errno || !(v >= 0) || v * mul > 0x1p62) {
        GL_LOGW("host: GLINT_MEM_AVAILABLE=%s is not a byte count; ignored", e);
        return -1;
    }
    return (int64_t)(v * mul);
}

int64_t gl_host_mem_available(void)
{
    char mi[8192], dir[4096], lim[64], use[64], stat[8192];
    cgroup_dir(dir, sizeof dir);
    const char *l = cg_file(dir, "memory.max", lim, sizeof lim);
    const char *u = l ? cg_file(dir, "memory.current", use, sizeof use) : NULL;
    const char *st = l ? cg_file(dir, "memory.stat", stat, sizeof stat) : NULL;
    if (!l) {
        l = slurp("/sys/fs/cgroup/memory/memory.limit_in_bytes", lim, sizeof lim);
        u = slurp("/sys/fs/cgroup/memory/memory.usage_in_bytes", use, sizeof use);
        st = slurp("/sys/fs/cgroup/memory/memory.stat", stat, sizeof stat);
    }
    int64_t room = gl_host_mem_room(slurp("/proc/meminfo", mi, sizeof mi), l, u, st);
    int64_t cap = env_cap();
    return cap >= 0 && (room < 0 || cap < room) ? cap : room;
}

int64_t gl_host_model_bytes(const char *path)
{
    struct stat sb;
    if (!path || stat(path, &sb) != 0)
        return 0;
    if (S_ISREG(sb.st_mode))
        return (int64_t)sb.st_size;
    DIR *d = S_ISDIR(sb.st_mode) ? opendir(path) : NULL;
    int64_t total = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name);
        char p[4352];
        if (n < 12 || strcmp(e->d_name + n - 12, ".safetensors") != 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode))
            total += (int64_t)sb.st_size;
    }
    if (d)
        closedir(d);
    return total;
}

int gl_host_pin_thread(pthread_t t, int cpu)
{
    if (cpu < 0 || cpu >= CPU_SETSIZE)
        return EINVAL;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(t, sizeof set, &set);
}
