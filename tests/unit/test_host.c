// SPDX-License-Identifier: MIT
// base/host: core and memory detection over synthetic kernel text (sysfs topology, cgroup v1/v2,
// /proc/meminfo), so the decisions are checked for machines this one is not (SMT pairs, odd
// sibling numbering, quotas, containers), plus a smoke test of the real readers.
#define _GNU_SOURCE // pthread_getaffinity_np
#include "base/host.h"
#include "test.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

TEST(test_cpulist)
{
    uint8_t set[16] = {0};
    CHECK(gl_host_parse_cpulist("0-3,8,10-11\n", set, 16) == 7);
    CHECK(set[0] && set[3] && !set[4] && set[8] && !set[9] && set[10] && set[11] && !set[12]);
    uint8_t s2[16] = {0};
    CHECK(gl_host_parse_cpulist("5", s2, 16) == 1 && s2[5]);
    // Hostile or malformed text is refused, not half-trusted.
    const char *bad[] = {"", "x", "3-1", "0-16", "-1", "1,,2", "1-", "1 2", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint8_t s3[16] = {0};
        int n = gl_host_parse_cpulist(bad[i], s3, 16);
        CHECKF(n <= 0, "'%s' -> %d", bad[i], n);
    }
}

TEST(test_quota)
{
    CHECK(gl_host_cpu_quota("max 100000\n", NULL, NULL) == 0);
    CHECK(gl_host_cpu_quota("400000 100000\n", NULL, NULL) == 4);
    CHECK(gl_host_cpu_quota("150000 100000\n", NULL, NULL) == 1); // 1.5 cpus: one whole core
    CHECK(gl_host_cpu_quota("50000 100000\n", NULL, NULL) == 1);  // at least one
    CHECK(gl_host_cpu_quota(NULL, "-1\n", "100000\n") == 0);
    CHECK(gl_host_cpu_quota(NULL, "300000\n", "100000\n") == 3);
    CHECK(gl_host_cpu_quota("max 100000\n", "200000\n", "100000\n") == 2); // v1 when v2 is open
    CHECK(gl_host_cpu_quota("junk", "junk", "100000") == 0);
    CHECK(gl_host_cpu_quota(NULL, NULL, NULL) == 0);
}

// 8 cpus, 4 cores: the Intel numbering (siblings n and n+4).
static const char *const k_intel[8] = {"0,4", "1,5", "2,6", "3,7", "0,4", "1,5", "2,6", "3,7"};
// The AMD-style numbering (siblings 2k and 2k+1).
static const char *const k_amd[8] = {"0-1", "0-1", "2-3", "2-3", "4-5", "4-5", "6-7", "6-7"};

TEST(test_pick)
{
    uint8_t all[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    int32_t out[8];
    int n = gl_host_pick_cpus(all, 8, k_intel, 0, out, 8);
    CHECK(n == 4 && out[0] == 0 && out[1] == 1 && out[2] == 2 && out[3] == 3);
    n = gl_host_pick_cpus(all, 8, k_amd, 0, out, 8);
    CHECK(n == 4 && out[0] == 0 && out[1] == 2 && out[2] == 4 && out[3] == 6);
    // Affinity mask {4,5,6} (taskset): cores 0,1,2 through their second siblings.
    uint8_t some[8] = {0, 0, 0, 0, 1, 1, 1, 0};
    n = gl_host_pick_cpus(some, 8, k_intel, 0, out, 8);
    CHECK(n == 3 && out[0] == 4 && out[1] == 5 && out[2] == 6);
    n = gl_host_pick_cpus(some, 8, k_amd, 0, out, 8); // 4,5 are one core; 6 another
    CHECK(n == 2 && out[0] == 4 && out[1] == 6);
    // A quota caps the count; cap caps it too.
    n = gl_host_pick_cpus(all, 8, k_intel, 2, out, 8);
    CHECK(n == 2 && out[0] == 0 && out[1] == 1);
    n = gl_host_pick_cpus(all, 8, k_intel, 0, out, 3);
    CHECK(n == 3);
    // No topology (no sysfs, or unreadable): every allowed cpu is its own core.
    n = gl_host_pick_cpus(all, 8, NULL, 0, out, 8);
    CHECK(n == 8);
    // A sibling list that does not name the cpu itself, or is junk, counts as unknown.
    const char *const odd[2] = {"1", "zz"};
    uint8_t two[2] = {1, 1};
    n = gl_host_pick_cpus(two, 2, odd, 0, out, 2);
    CHECK(n == 2);
    // Negative control: the picker must drop SMT siblings (8 allowed cpus are not 8 cores).
    CHECK(gl_host_pick_cpus(all, 8, k_amd, 0, out, 8) != 8);
}

TEST(test_mem_room)
{
    const char *mi = "MemTotal:       32000000 kB\nMemFree:         1000000 kB\n"
                     "MemAvailable:   20000000 kB\nBuffers:           1000 kB\n";
    CHECK(gl_host_mem_room(mi, NULL, NULL, NULL) == (int64_t)20000000 * 1024);
    CHECK(gl_host_mem_room(mi, "max\n", "123\n", NULL) == (int64_t)20000000 * 1024);
    // A container limited to 8 GiB using 3 GiB has 5 GiB of room, whatever the host has.
    CHECK(gl_host_mem_room(mi, "8589934592\n", "3221225472\n", NULL) == (int64_t)5 << 30);
    CHECK(gl_host_mem_room(mi, "1000\n", "5000\n", NULL) == 0); // over its limit already
    // cgroup v1's "no limit" is a huge number.
    CHECK(gl_host_mem_room(mi, "9223372036854771712\n", "5\n", NULL) == (int64_t)20000000 * 1024);
    CHECK(gl_host_mem_room("MemTotal: 5 kB\n", NULL, NULL, NULL) == -1);
    CHECK(gl_host_mem_room("MemAvailable: junk\n", "4096\n", "0\n", NULL) == 4096);
    CHECK(gl_host_mem_room(NULL, NULL, NULL, NULL) == -1);
    // The model file read into the page cache counts in memory.current, but its inactive pages
    // are reclaimed first: 8 GiB limit, 7 GiB charged of which 4 GiB inactive file -> 5 GiB room.
    const char *v2stat = "anon 3221225472\nfile 4294967296\nactive_file 0\n"
                         "inactive_file 4294967296\n";
    CHECK(gl_host_mem_room(mi, "8589934592\n", "7516192768\n", v2stat) == (int64_t)5 << 30);
    const char *v1stat = "cache 4294967296\ninactive_file 9\ntotal_inactive_file 4294967296\n";
    // v1 files carry both keys: the cgroup's own inactive_file is taken.
    CHECK(gl_host_mem_room(mi, "8589934592\n", "7516192768\n", v1stat) == ((int64_t)1 << 30) + 9);
    CHECK(gl_host_mem_room(mi, "8589934592\n", "7516192768\n", "total_inactive_file 5\n") ==
          ((int64_t)1 << 30) + 5);
    // Negative control: without memory.stat the same container looks 1 GiB from full.
    CHECK(gl_host_mem_room(mi, "8589934592\n", "7516192768\n", NULL) == (int64_t)1 << 30);
}

TEST(test_real_machine)
{
    const struct gl_host_cpus *c = gl_host_cpus();
    CHECK(c->n >= 1 && c->n <= GL_HOST_MAX_CPUS);
    CHECK(c->n <= c->n_allowed || c->cpus[0] < 0);
    CHECK(gl_host_cpus() == c); // detected once
    // Pinning this thread to the first core chosen leaves exactly that cpu in its mask.
    cpu_set_t before, after;
    REQUIRE(pthread_getaffinity_np(pthread_self(), sizeof before, &before) == 0);
    CHECK(gl_host_pin_thread(pthread_self(), -1) == EINVAL);
    if (c->cpus[0] >= 0) {
        CHECK(gl_host_pin_thread(pthread_self(), c->cpus[0]) == 0);
        REQUIRE(pthread_getaffinity_np(pthread_self(), sizeof after, &after) == 0);
        CHECK(CPU_COUNT(&after) == 1 && CPU_ISSET(c->cpus[0], &after));
        REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof before, &before) == 0);
    }
    setenv("GLINT_MEM_AVAILABLE", "12345", 1);
    CHECK(gl_host_mem_available() == 12345);
    setenv("GLINT_MEM_AVAILABLE", "2M", 1);
    CHECK(gl_host_mem_available() == 2 << 20);
    unsetenv("GLINT_MEM_AVAILABLE");
    CHECK(gl_host_mem_available() > 0);
}

int main(void)
{
    RUN_TESTS(test_cpulist, test_quota, test_pick, test_mem_room, test_real_machine);
}
