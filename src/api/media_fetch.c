// SPDX-License-Identifier: MIT
// api/media_fetch: an http(s) image_url / video_url part fetched with libcurl, only from the hosts
// the operator named with --allowed-media-domains (api.h, gl_api_media_opts). The rules, each a
// 400 naming the part when broken:
//  - the URL parses (curl's URL API) and its host is in the list ("*" allows any host; the list
//    is compared case-insensitively and exactly: "example.com" does not allow "a.example.com");
//  - http and https only, and no redirects are followed (a redirect could leave the list: it is
//    answered as an error naming the status);
//  - the reply is 200 with a body of 1 .. max_bytes bytes: the transfer is cut as soon as it
//    passes max_bytes, whatever Content-Length says;
//  - the whole transfer ends within timeout_ms (connect included).
// The connection thread waits for the fetch (one transfer per part, no cache). Threads: curl's
// global init runs once (pthread_once); each fetch has its own easy handle, with signals off.
#include "api/api.h"

#include <curl/curl.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

#define MEDIA_FAIL(...) gl_api_fail(e, 400, param, __VA_ARGS__)

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static CURLcode g_init_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
    g_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

// host is in the comma-separated list (spaces around entries ignored), or the list has "*".
static int host_allowed(const char *list, const char *host)
{
    const size_t hl = strlen(host);
    for (const char *p = list; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *q = p;
        while (*q && *q != ',')
            q++;
        const char *end = q;
        while (end > p && end[-1] == ' ')
            end--;
        const size_t n = (size_t)(end - p);
        if ((n == 1 && *p == '*') || (n == hl && n > 0 && strncasecmp(p, host, n) == 0))
            return 1;
        p = q;
    }
    return 0;
}

struct sink {
    uint8_t *buf;
    size_t n, cap, max;
    int over; // the body passed max
};

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *user)
{
    struct sink *s = user;
    const size_t add = size * nmemb;
    if (add > s->max - s->n) {
        s->over = 1;
        return 0; // aborts the transfer (CURLE_WRITE_ERROR)
    }
    if (s->n + add > s->cap) {
        size_t cap = s->cap ? s->cap : 1 << 16;
        while (cap < s->n + add)
            cap *= 2;
        cap = cap < s->max ? cap : s->max;
        uint8_t *b = gl_realloc(s->buf, cap);
        if (!b)
            return 0;
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->n, ptr, add);
    s->n += add;
    return add;
}

// The URL's host into host[cap] (curl's parser, which also checks the scheme is http(s)).
static gl_status url_host(const char *url, char *host, size_t cap, const char *param,
                          struct gl_api_error *e)
{
    CURLU *u = curl_url();
    if (!u)
        return gl_api_fail(e, 500, param, "%s: no memory to parse the URL", param);
    char *h = NULL, *scheme = NULL;
    gl_status st = GL_OK;
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK)
        st = MEDIA_FAIL("%s: the URL does not parse", param);
    else if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0)
        st = MEDIA_FAIL("%s: only http and https URLs are fetched", param);
    else if (strlen(h) >= cap)
        st = MEDIA_FAIL("%s: the URL's host name is too long", param);
    else
        memcpy(host, h, strlen(h) + 1);
    curl_free(h);
    curl_free(scheme);
    curl_url_cleanup(u);
    return st;
}

gl_status gl_api_media_fetch(const struct gl_api_media_opts *o, const char *url, const char *param,
                             uint8_t **bytes, size_t *n, struct gl_api_error *e)
{
    *bytes = NULL;
    *n = 0;
    if (!o->allowed_domains || !o->allowed_domains[0])
        return MEDIA_FAIL("%s: remote media URLs are not fetched by this server (it was started "
                          "without --allowed-media-domains): send the bytes as a data: URL "
                          "(data:<type>;base64,...)",
                          param);
    char host[256];
    gl_status st = url_host(url, host, sizeof host, param, e);
    if (st != GL_OK)
        return st;
    if (!host_allowed(o->allowed_domains, host))
        return MEDIA_FAIL("%s: host '%s' is not in --allowed-media-domains", param, host);
    pthread_once(&g_once, global_init);
    CURL *c = g_init_rc == CURLE_OK ? curl_easy_init() : NULL;
    if (!c)
        return gl_api_fail(e, 500, param, "%s: cannot start an HTTP client", param);
    struct sink s = {.max = o->max_bytes};
    char cerr[CURL_ERROR_SIZE] = "";
    const long timeout_ms = o->fetch_timeout_ms > 0 ? o->fetch_timeout_ms : 10000;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)o->max_bytes);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "glint");
    const CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    if (s.over || rc == CURLE_FILESIZE_EXCEEDED)
        st = MEDIA_FAIL("%s: the reply from %s is over the %zu-byte media limit "
                        "(--max-media-bytes)",
                        param, host, o->max_bytes);
    else if (rc == CURLE_OPERATION_TIMEDOUT)
        st = MEDIA_FAIL("%s: fetching from %s timed out after %ld ms", param, host, timeout_ms);
    else if (rc != CURLE_OK)
        st = MEDIA_FAIL("%s: fetching from %s failed: %.200s", param, host,
                        cerr[0] ? cerr : curl_easy_strerror(rc));
    else if (status != 200)
        st = MEDIA_FAIL("%s: %s answered HTTP %ld%s", param, host, status,
                        status >= 300 && status < 400 ? " (redirects are not followed)" : "");
    else if (s.n == 0)
        st = MEDIA_FAIL("%s: the reply from %s is empty", param, host);
    if (st != GL_OK) {
        gl_free(s.buf);
        return st;
    }
    *bytes = s.buf;
    *n = s.n;
    return GL_OK;
}
