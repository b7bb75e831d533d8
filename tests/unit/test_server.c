// SPDX-License-Identifier: MIT
// server/ without sockets (issue 23): the route table against vLLM's paths and methods (404 for
// an unknown path, 405 naming the allowed method), the CORS flags' parsing as vLLM takes them
// (a JSON list or comma-separated; "*"; header names lowercased; malformed lists refused naming
// the flag), and the /metrics page as Prometheus text: every sample line `name{labels} value`
// after its family's HELP and TYPE, histogram buckets cumulative with +Inf equal to _count,
// vLLM's 1-2-5 token buckets up to max_model_len, and the counters the calls made. (The token
// bucket of --limit-request-rate-per-ip is test_ratelimit's.)
#include "server/cors.h"
#include "server/metrics.h"
#include "server/route.h"
#include "test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

TEST(test_routes)
{
    static const struct {
        const char *method, *url;
        enum gl_route_id id;
    } ok[] = {
        {"POST", "/v1/chat/completions", GL_R_CHAT},
        {"POST", "/v1/completions", GL_R_COMP},
        {"POST", "/v1/responses", GL_R_RESP},
        {"GET", "/v1/models", GL_R_MODELS},
        {"GET", "/health", GL_R_HEALTH},
        {"GET", "/ping", GL_R_PING},
        {"GET", "/metrics", GL_R_METRICS},
        {"GET", "/version", GL_R_VERSION},
        {"POST", "/tokenize", GL_R_TOK},
        {"POST", "/detokenize", GL_R_DETOK},
    };
    const char *allow = NULL;
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        CHECKF(gl_route_find(ok[i].method, ok[i].url, &allow) == ok[i].id, "%s %s", ok[i].method,
               ok[i].url);
        CHECK(allow && !strcmp(allow, ok[i].method));
        // The other method on a served path: a 405 that names the allowed one.
        const char *other = strcmp(ok[i].method, "GET") ? "GET" : "POST";
        CHECK(gl_route_find(other, ok[i].url, &allow) == GL_R_NONE);
        CHECK(allow && !strcmp(allow, ok[i].method));
    }
    // Unknown paths, prefixes, trailing slashes and case are 404s (exact match, as FastAPI).
    static const char *const unknown[] = {"/",
                                          "/v1",
                                          "/v1/chat/completions/",
                                          "/V1/models",
                                          "/v1/models/x",
                                          "/v1/embeddings",
                                          "/healthz",
                                          "/metrics/",
                                          "/v1/chat/completion",
                                          "/tokenize/1",
                                          ""};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        CHECKF(gl_route_find("GET", unknown[i], &allow) == GL_R_NONE && !allow, "'%s'", unknown[i]);
        CHECK(gl_route_find("POST", unknown[i], &allow) == GL_R_NONE && !allow);
    }
    CHECK(gl_route_find("get", "/health", &allow) == GL_R_NONE && allow); // methods are exact
}

TEST(test_cors_flags)
{
    struct gl_cors c;
    struct gl_err err = {0};
    // Defaults: every origin, method and header; credentials off.
    REQUIRE(gl_cors_init(&c, NULL, NULL, NULL, 0, &err) == GL_OK);
    CHECK(c.origins.any && c.methods.any && c.headers.any && !c.credentials);
    CHECK(c.origins.n == 0);
    gl_cors_free(&c);
    // vLLM's JSON spelling and the comma form give the same lists; headers are lowercased,
    // origins kept as given; blanks around entries dropped.
    REQUIRE(gl_cors_init(&c, "[\"https://a.example\", \"http://B.example:8080\"]", " GET , POST ",
                         "[\"X-Api-Key\",\"Content-Type\"]", 1, &err) == GL_OK);
    CHECK(!c.origins.any && c.origins.n == 2 && !strcmp(c.origins.item[0], "https://a.example") &&
          !strcmp(c.origins.item[1], "http://B.example:8080"));
    CHECK(!c.methods.any && c.methods.n == 2 && !strcmp(c.methods.item[0], "GET") &&
          !strcmp(c.methods.item[1], "POST"));
    CHECK(c.headers.n == 2 && !strcmp(c.headers.item[0], "x-api-key") &&
          !strcmp(c.headers.item[1], "content-type"));
    CHECK(c.credentials == 1);
    gl_cors_free(&c);
    REQUIRE(gl_cors_init(&c, "https://a.example,*", NULL, NULL, 0, &err) == GL_OK);
    CHECK(c.origins.any && c.origins.n == 1);
    gl_cors_free(&c);
    // Refusals name the flag.
    static const struct {
        const char *o, *m, *h, *flag;
    } bad[] = {
        {"[\"a\", 3]", NULL, NULL, "--allowed-origins"},
        {"[\"a\"", NULL, NULL, "--allowed-origins"},
        {NULL, "GET,,POST", NULL, "--allowed-methods"},
        {NULL, NULL, "[\"a\", null]", "--allowed-headers"},
        {NULL, NULL, "[\"\"]", "--allowed-headers"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err = (struct gl_err){0};
        CHECKF(gl_cors_init(&c, bad[i].o, bad[i].m, bad[i].h, 0, &err) == GL_E_INVAL, "case %zu",
               i);
        CHECKF(strstr(err.msg, bad[i].flag) != NULL, "case %zu: %s", i, err.msg);
    }
    // More entries than the table holds.
    char many[GL_CORS_MAX_ITEMS * 4 + 8] = "";
    for (int i = 0; i <= GL_CORS_MAX_ITEMS; i++)
        strcat(many, i ? ",o" : "o");
    CHECK(gl_cors_init(&c, many, NULL, NULL, 0, &err) == GL_E_INVAL);
}

// The value of the sample line `name{...labels...} value` whose text before the value is key.
static double sample(const char *page, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = page; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, key, n) && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return NAN;
}

// Every line is a comment (# HELP / # TYPE) or `name{labels} value` with a finite or +Inf value
// whose family had a TYPE line before it; returns the number of sample lines, -1 on a bad line.
static int prometheus_lines(const char *page)
{
    char typed[256][96];
    int n_typed = 0, n_samples = 0;
    for (const char *p = page; *p;) {
        const char *e = strchr(p, '\n');
        if (!e)
            return -1; // the page ends with a newline
        char line[1024];
        size_t len = (size_t)(e - p);
        if (len == 0 || len >= sizeof line)
            return -1;
        memcpy(line, p, len);
        line[len] = 0;
        p = e + 1;
        if (!strncmp(line, "# HELP ", 7))
            continue;
        char fam[96];
        if (!strncmp(line, "# TYPE ", 7)) {
            if (sscanf(line + 7, "%95s", fam) != 1 || n_typed == 256)
                return -1;
            snprintf(typed[n_typed++], sizeof typed[0], "%s", fam);
            continue;
        }
        const char *brace = strchr(line, '{'), *close = strrchr(line, '}');
        if (!brace || !close || close < brace || close[1] != ' ')
            return -1;
        size_t fl = (size_t)(brace - line);
        int known = 0;
        for (int i = 0; i < n_typed && !known; i++) {
            size_t tl = strlen(typed[i]);
            // A histogram's samples are FAMILY_bucket / _sum / _count.
            known =
                fl >= tl && !strncmp(line, typed[i], tl) &&
                (fl == tl || !strncmp(line + tl, "_bucket", fl - tl) ||
                 !strncmp(line + tl, "_sum", fl - tl) || !strncmp(line + tl, "_count", fl - tl));
        }
        char *end = NULL;
        double v = strtod(close + 2, &end);
        if (!known || !end || *end || isnan(v))
            return -1;
        n_samples++;
    }
    return n_samples;
}

TEST(test_metrics_page)
{
    struct gl_metrics m;
    gl_metrics_init(&m);
    gl_metrics_set_max_model_len(&m, 4096);
    // vLLM's build_1_2_5_buckets(4096): 1, 2, 5, ..., 1000, 2000 (5000 is over).
    static const double want[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000};
    const struct gl_hist *pt = &m.h[GL_HIST_PROMPT_TOK];
    CHECKF(pt->n == 11, "%d token buckets", pt->n);
    for (int i = 0; i < pt->n && i < 11; i++)
        CHECK(pt->bounds[i] == want[i]);
    gl_metrics_observe(&m, GL_HIST_TTFT, 0.004);
    gl_metrics_observe(&m, GL_HIST_TTFT, 0.3);
    gl_metrics_observe(&m, GL_HIST_TTFT, 1e6); // past every bucket: +Inf only
    gl_metrics_observe(&m, GL_HIST_PROMPT_TOK, 7);
    gl_metrics_finish(&m, "stop");
    gl_metrics_finish(&m, "stop");
    gl_metrics_finish(&m, "length");
    gl_metrics_finish(&m, "something else"); // counted as abort
    gl_metrics_reject(&m);
    struct gl_engine_stats st = {0};
    struct gl_api_mask_stats ms = {0};
    size_t len = 0;
    char *page = gl_metrics_render(&m, "glimmer", &st, &ms, &len);
    REQUIRE(page && len == strlen(page));
    const int n = prometheus_lines(page);
    CHECKF(n > 50, "%d sample lines (or a malformed line)", n);
    CHECK(sample(page,
                 "vllm:request_success_total{finished_reason=\"stop\",model_name=\"glimmer\"}") ==
          2);
    CHECK(sample(page,
                 "vllm:request_success_total{finished_reason=\"length\",model_name=\"glimmer\"}") ==
          1);
    CHECK(sample(page,
                 "vllm:request_success_total{finished_reason=\"abort\",model_name=\"glimmer\"}") ==
          1);
    CHECK(sample(page, "vllm:time_to_first_token_seconds_count{model_name=\"glimmer\"}") == 3);
    CHECK(fabs(sample(page, "vllm:time_to_first_token_seconds_sum{model_name=\"glimmer\"}") -
               (0.004 + 0.3 + 1e6)) < 1e-6);
    // Cumulative buckets, non-decreasing, +Inf = count; 0.004 is under the 0.005 bound.
    CHECK(sample(page,
                 "vllm:time_to_first_token_seconds_bucket{le=\"0.005\",model_name=\"glimmer\"}") ==
          1);
    CHECK(sample(page,
                 "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"glimmer\"}") ==
          3);
    double prev = -1;
    int n_le = 0;
    for (const char *p = strstr(page, "vllm:time_to_first_token_seconds_bucket{"); p;
         p = strstr(p + 1, "vllm:time_to_first_token_seconds_bucket{")) {
        const double v = strtod(strchr(p, '}') + 2, NULL);
        CHECK(v >= prev);
        prev = v;
        n_le++;
    }
    CHECK(n_le == m.h[GL_HIST_TTFT].n + 1);
    CHECK(sample(page, "vllm:request_prompt_tokens_bucket{le=\"5.0\",model_name=\"glimmer\"}") ==
              0 ||
          sample(page, "vllm:request_prompt_tokens_bucket{le=\"5\",model_name=\"glimmer\"}") == 0);
    gl_free(page);
    // With speculation: vLLM's spec_decode counters and the cost model's glint:* beside them.
    m.spec_k = 4;
    st.spec_len_steps[0] = 7;
    st.spec_len_steps[3] = 2;
    st.spec_probes = 1;
    st.spec_acceptance = 0.25;
    st.spec_len = 3;
    page = gl_metrics_render(&m, "glimmer", &st, &ms, &len);
    REQUIRE(page);
    CHECKF(prometheus_lines(page) > n, "%d sample lines", prometheus_lines(page));
    CHECK(sample(page,
                 "glint:spec_decode_draft_len_steps_total{model_name=\"glimmer\",len=\"0\"}") == 7);
    CHECK(sample(page,
                 "glint:spec_decode_draft_len_steps_total{model_name=\"glimmer\",len=\"3\"}") == 2);
    CHECK(sample(page,
                 "glint:spec_decode_draft_len_steps_total{model_name=\"glimmer\",len=\"4\"}") == 0);
    CHECK(sample(page, "glint:spec_decode_off_steps_total{model_name=\"glimmer\"}") == 7);
    CHECK(sample(page, "glint:spec_decode_probe_drafts_total{model_name=\"glimmer\"}") == 1);
    CHECK(sample(page, "glint:spec_decode_acceptance{model_name=\"glimmer\"}") == 0.25);
    CHECK(sample(page, "glint:spec_decode_draft_len{model_name=\"glimmer\"}") == 3);
    CHECK(sample(page, "vllm:spec_decode_num_drafts_total{model_name=\"glimmer\"}") == 0);
    CHECK(!strstr(page, "glint:spec_decode_dflash_pages_total")); // no DFlash pool
    gl_free(page);
    st.spec_jf_drafts = 5;
    st.dfl_pages_total = 64;
    st.dfl_pages_used = 9;
    st.dfl_no_pages = 2;
    page = gl_metrics_render(&m, "glimmer", &st, &ms, &len);
    REQUIRE(page);
    CHECK(sample(page, "glint:spec_decode_jump_forward_drafts_total{model_name=\"glimmer\"}") == 5);
    CHECK(sample(page, "glint:spec_decode_dflash_pages_total{model_name=\"glimmer\"}") == 64);
    CHECK(sample(page, "glint:spec_decode_dflash_pages_used{model_name=\"glimmer\"}") == 9);
    CHECK(sample(page, "glint:spec_decode_dflash_no_pages_total{model_name=\"glimmer\"}") == 2);
    gl_free(page);
    gl_metrics_destroy(&m);
}

int main(void)
{
    RUN_TESTS(test_routes, test_cors_flags, test_metrics_page);
}
