// SPDX-License-Identifier: MIT
// mediasrc/fetch: an http(s) image_url / video_url part fetched with libcurl, only from the
// hosts the operator named with --allowed-media-domains (mediasrc.h, gl_mediasrc_opts). The
// rules, each a client error (HTTP 400) when broken:
//  - the URL parses (curl's URL API) and its host is in the list ("*" allows any host; the list
//    is compared case-insensitively and exactly: "example.com" does not allow "a.example.com");
//  - http and https only, and no redirects are followed (a redirect could leave the list: it is
//    answered as an error naming the status);
//  - the reply is 200 with a body of 1 .. max_bytes bytes: the transfer is cut as soon as it
//    passes max_bytes, whatever Content-Length says;
//  - the whole transfer ends within timeout_ms (connect included).
// The connection thread waits for the fetch (one transfer per part, no cache). Threads: curl's
// global init runs once (pthread_once); each fetch has its own easy handle, with signals off.
#include "mediasrc/mediasrc_int.h"

#include <curl/curl.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static CURLcode g_init_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
    g_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int gl_mediasrc_host_allowed(const char *list, const char *host)
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
static gl_status url_host(const char *url, char *host, size_t cap, struct gl_err *err)
{
    CURLU *u = curl_url();
    if (!u)
        return gl_err_set(err, GL_E_NOMEM, "no memory to parse the URL");
    char *h = NULL, *scheme = NULL;
    gl_status st = GL_OK;
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK)
        st = gl_err_set(err, GL_E_INVAL, "the URL does not parse");
    else if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0)
        st = gl_err_set(err, GL_E_INVAL, "only http and https URLs are fetched");
    else if (strlen(h) >= cap)
        st = gl_err_set(err, GL_E_INVAL, "the URL's host name is too long");
    else
        memcpy(host, h, strlen(h) + 1);
    curl_free(h);
    curl_free(scheme);
    curl_url_cleanup(u);
    return st;
}

gl_status gl_mediasrc_fetch(const struct gl_mediasrc_opts *o, const char *url, uint8_t **bytes,
                            size_t *n, struct gl_err *err)
{
    *bytes = NULL;
    *n = 0;
    if (!o->allowed_domains || !o->allowed_domains[0])
        return gl_err_set(err, GL_E_UNSUPPORTED,
                          "remote media URLs are not fetched by this server (it was started "
                          "without --allowed-media-domains): send the bytes as a data: URL "
                          "(data:<type>;base64,...)");
    char host[256];
    gl_status st = url_host(url, host, sizeof host, err);
    if (st != GL_OK)
        return st;
    if (!gl_mediasrc_host_allowed(o->allowed_domains, host))
        return gl_err_set(err, GL_E_INVAL, "host '%s' is not in --allowed-media-domains", host);
    pthread_once(&g_once, global_init);
    CURL *c = g_init_rc == CURLE_OK ? curl_easy_init() : NULL;
    if (!c)
        return gl_err_set(err, GL_E_INTERNAL, "cannot start an HTTP client");
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
        st = gl_err_set(err, GL_E_LIMIT,
                        "the reply from %s is over the %zu-byte media limit (--max-media-bytes)",
                        host, o->max_bytes);
    else if (rc == CURLE_OPERATION_TIMEDOUT)
        st = gl_err_set(err, GL_E_IO, "fetching from %s timed out after %ld ms", host, timeout_ms);
    else if (rc != CURLE_OK)
        st = gl_err_set(err, GL_E_IO, "fetching from %s failed: %.200s", host,
                        cerr[0] ? cerr : curl_easy_strerror(rc));
    else if (status != 200)
        st = gl_err_set(err, GL_E_IO, "%s answered HTTP %ld%s", host, status,
                        status >= 300 && status < 400 ? " (redirects are not followed)" : "");
    else if (s.n == 0)
        st = gl_err_set(err, GL_E_IO, "the reply from %s is empty", host);
    if (st != GL_OK) {
        gl_free(s.buf);
        return st;
    }
    *bytes = s.buf;
    *n = s.n;
    return GL_OK;
}
