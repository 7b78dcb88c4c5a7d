/* http_util.c - see http_util.h. */
#define _DEFAULT_SOURCE /* mkstemps */
#include "http_util.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#ifndef RAYBOXD
#error "RAYBOXD must name the rayboxd executable"
#endif

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

char *rbt_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (cap - n - 1 == 0) {
            char *g = realloc(buf, cap * 2);
            if (!g) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = g;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

void rbt_server_start(rbt_server *s, const char *const *args)
{
    memset(s, 0, sizeof *s);
    /* A name of its own, made empty here before the fork: a name from the
     * pid alone was reused once pids wrapped (test logs stay behind), and
     * the loop below then read an older server's port from the file
     * before the child had truncated it (connection refused, "status 0"
     * in CI, reproduced under load). */
    snprintf(s->log_path, sizeof s->log_path, RBT_SERVER_LOGS "XXXXXX.log",
             rbt_runner_pid());
    int log_fd = mkstemps(s->log_path, 4);
    ck_assert_msg(log_fd >= 0, "mkstemps %s: %s", s->log_path,
                  strerror(errno));
    const char *argv[64] = {RAYBOXD, "--port", "0", "--backend", "cpu"};
    int n = 5;
    for (int i = 0; args && args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        if (null < 0)
            _exit(127);
        dup2(log_fd, 2);
        close(log_fd);
        dup2(null, 1);
        dup2(null, 0);
        execv(RAYBOXD, (char *const *)argv);
        _exit(127);
    }
    close(log_fd);
    s->pid = pid;
    /* Wait for the first line: {"ts":..,"msg":"listening","port":N,..}. */
    for (int tries = 0; tries < 6000; tries++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            char *log = rbt_server_log(s);
            s->pid = 0;
            ck_abort_msg("rayboxd exited at start-up: %s", log ? log : "");
        }
        char *log = rbt_server_log(s);
        const char *at = log ? strstr(log, "\"msg\":\"listening\"") : NULL;
        const char *port = at ? strstr(at, "\"port\":") : NULL;
        if (port && strchr(port, '\n')) {
            s->port = atoi(port + 7);
            free(log);
            break;
        }
        free(log);
        sleep_ms(5);
    }
    ck_assert_msg(s->port > 0, "rayboxd did not say which port it took");
    snprintf(s->base, sizeof s->base, "http://127.0.0.1:%d", s->port);
}

int rbt_server_stop(rbt_server *s)
{
    if (!s->pid)
        return -1;
    kill(s->pid, SIGTERM);
    int st = 0;
    pid_t got;
    while ((got = waitpid(s->pid, &st, 0)) < 0 && errno == EINTR)
        ;
    s->pid = 0;
    if (got < 0 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

void rbt_fixture_start(rbt_server *s, const char *const *args,
                       rb_context **oracle)
{
    curl_global_init(CURL_GLOBAL_ALL);
    rbt_server_start(s, args);
    rb_context_options o;
    rb_context_options_init(&o);
    o.threads = 1;
    *oracle = rbt_context_opts(RBT_CPU, &o);
}

void rbt_fixture_stop(rbt_server *s, rb_context *oracle)
{
    rb_context_destroy(oracle);
    int st = rbt_server_stop(s);
    ck_assert_msg(st == 0, "rayboxd exited with %d after SIGTERM", st);
    unlink(s->log_path);
    curl_global_cleanup();
}

int rbt_server_stop_within(rbt_server *s, int ms)
{
    if (!s->pid)
        return -1;
    kill(s->pid, SIGTERM);
    int st = 0;
    for (int waited = 0; waited <= ms; waited += 10) {
        pid_t got = waitpid(s->pid, &st, WNOHANG);
        if (got == s->pid) {
            s->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        }
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    rbt_server_kill(s);
    return -2;
}

void rbt_server_kill(rbt_server *s)
{
    if (!s->pid)
        return;
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

char *rbt_server_log(const rbt_server *s)
{
    return rbt_read_file(s->log_path, NULL);
}

/* ------------------------------------------------------------------------
 * curl
 */
typedef struct sink {
    rbt_resp *r;
    size_t cap;
} sink;

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    sink *k = arg;
    rbt_resp *r = k->r;
    size_t add = size * n;
    if (r->len + add + 1 > k->cap) {
        size_t cap = k->cap ? k->cap : 4096;
        while (cap < r->len + add + 1)
            cap *= 2;
        char *g = realloc(r->body, cap);
        if (!g)
            return 0;
        r->body = g;
        k->cap = cap;
    }
    memcpy(r->body + r->len, p, add);
    r->len += add;
    r->body[r->len] = '\0';
    return add;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    rbt_resp *r = arg;
    size_t add = size * n, have = strlen(r->headers);
    if (add >= 5 && strncmp(p, "HTTP/", 5) == 0) /* a new response */
        have = 0, r->headers[0] = '\0';
    if (have + add + 1 < sizeof r->headers) {
        memcpy(r->headers + have, p, add);
        r->headers[have + add] = '\0';
    }
    return add;
}

typedef struct source {
    const char *p;
    size_t left, piece;
} source;

static size_t on_read(char *buf, size_t size, size_t n, void *arg)
{
    source *s = arg;
    size_t k = size * n;
    if (k > s->piece)
        k = s->piece;
    if (k > s->left)
        k = s->left;
    memcpy(buf, s->p, k);
    s->p += k;
    s->left -= k;
    return k;
}

static int perform(CURL *h, int own, const char *method, const char *url,
                   const char *content_type, const void *body, size_t len,
                   const char *accept, const char *const *extra,
                   source *chunked, rbt_resp *resp)
{
    memset(resp, 0, sizeof *resp);
    sink k = {resp, 0};
    struct curl_slist *hdr = NULL;
    char line[512];
    if (content_type) {
        snprintf(line, sizeof line, "Content-Type: %s", content_type);
        hdr = curl_slist_append(hdr, line);
    }
    else if (body || chunked) /* curl would say form-urlencoded */
        hdr = curl_slist_append(hdr, "Content-Type:");
    if (accept) {
        snprintf(line, sizeof line, "Accept: %s", accept);
        hdr = curl_slist_append(hdr, line);
    }
    /* No "Expect: 100-continue" round trip (and its 1 s wait). */
    hdr = curl_slist_append(hdr, "Expect:");
    if (chunked)
        hdr = curl_slist_append(hdr, "Transfer-Encoding: chunked");
    for (int i = 0; extra && extra[i]; i++)
        hdr = curl_slist_append(hdr, extra[i]);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &k);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, resp);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 300L);
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (chunked) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, chunked);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    } else if (body || strcmp(method, "POST") == 0 ||
               strcmp(method, "PATCH") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    }
    char why[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, why);
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
    else /* status 0 alone says nothing of why: keep it in the test's log */
        fprintf(stderr, "curl %s %s: %s (%d: %s)\n", method, url, why,
                (int)rc, curl_easy_strerror(rc));
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    /* Leave the handle reusable for a plain request. */
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_easy_setopt(h, CURLOPT_NOBODY, 0L);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, NULL);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, NULL);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, NULL);
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    curl_slist_free_all(hdr);
    if (own)
        curl_easy_cleanup(h);
    if (!resp->body) {
        resp->body = calloc(1, 1);
        resp->len = 0;
    }
    return rc == CURLE_OK ? 0 : -1;
}

int rbt_http(CURL *h, const char *method, const char *url,
             const char *content_type, const void *body, size_t len,
             const char *accept, const char *const *extra, rbt_resp *resp)
{
    int own = !h;
    if (own)
        h = curl_easy_init();
    return perform(h, own, method, url, content_type, body, len, accept,
                   extra, NULL, resp);
}

int rbt_http_chunked(CURL *h, const char *url, const char *content_type,
                     const void *body, size_t len, size_t piece,
                     rbt_resp *resp)
{
    int own = !h;
    if (own)
        h = curl_easy_init();
    source src = {body, len, piece};
    return perform(h, own, "POST", url, content_type, NULL, 0, NULL, NULL,
                   &src, resp);
}

int rbt_get(CURL *h, const rbt_server *s, const char *path, rbt_resp *resp)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    return rbt_http(h, "GET", url, NULL, NULL, 0, NULL, NULL, resp);
}

void rbt_resp_free(rbt_resp *r)
{
    free(r->body);
    r->body = NULL;
}

const char *rbt_header(const rbt_resp *r, const char *name, char *buf,
                       size_t cap)
{
    size_t n = strlen(name);
    const char *p = r->headers;
    while (p && *p) {
        if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
            const char *v = p + n + 1;
            while (*v == ' ')
                v++;
            size_t k = strcspn(v, "\r\n");
            if (k >= cap)
                k = cap - 1;
            memcpy(buf, v, k);
            buf[k] = '\0';
            return buf;
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return NULL;
}

size_t rbt_strip_meta(const char *body, size_t len)
{
    const char *m = NULL, *p = body;
    while ((p = strstr(p, ",\"meta\":")) && p < body + len)
        m = p++;
    return m ? (size_t)(m - body) : len;
}

/* ------------------------------------------------------------------------
 * Raw sockets
 */
size_t rbt_raw(int port, const void *req, size_t len, int shut_wr,
               char *out, size_t cap, int timeout_ms, int *closed)
{
    *closed = 0;
    out[0] = '\0';
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    const char *p = req;
    size_t left = len;
    while (left) {
        ssize_t n = send(fd, p, left, MSG_NOSIGNAL);
        if (n <= 0)
            break; /* the server may close early: that is what some
                      tests want to see */
        p += n;
        left -= (size_t)n;
    }
    if (shut_wr)
        shutdown(fd, SHUT_WR);
    size_t got = 0;
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, timeout_ms) <= 0)
            break;
        ssize_t n = recv(fd, out + got, cap - 1 - got, 0);
        if (n == 0) {
            *closed = 1;
            break;
        }
        if (n < 0) {
            *closed = errno == ECONNRESET;
            break;
        }
        got += (size_t)n;
        out[got] = '\0';
        if (got + 1 >= cap)
            break;
    }
    close(fd);
    return got;
}

int rbt_metrics_with(const char *url, const char *text, rbt_resp *out)
{
    for (int tries = 0;; tries++) {
        rbt_http(NULL, "GET", url, NULL, NULL, 0, NULL, NULL, out);
        ck_assert_int_eq(out->status, 200);
        if (strstr(out->body, text))
            return 1;
        if (tries == 200)
            return 0;
        rbt_resp_free(out);
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
}

double rbt_metric(const char *page, const char *name)
{
    size_t n = strlen(name);
    const char *p = page;
    while (p && *p) {
        if (strncmp(p, name, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return -1;
}

char *rbt_count_body(int rays, int boxes, size_t *len)
{
    size_t cap = (size_t)rays * 24 + (size_t)boxes * 16 + 64, n = 0;
    char *b = malloc(cap);
    ck_assert_ptr_nonnull(b);
    n += (size_t)sprintf(b + n, "{\"mode\":\"count\",\"rays\":[");
    for (int i = 0; i < rays; i++)
        n += (size_t)sprintf(b + n, "%s[-10,0.5,0.5,1,0,0]", i ? "," : "");
    n += (size_t)sprintf(b + n, "],\"boxes\":[");
    for (int i = 0; i < boxes; i++)
        n += (size_t)sprintf(b + n, "%s[0,0,0,1,1,1]", i ? "," : "");
    n += (size_t)sprintf(b + n, "]}");
    *len = n;
    return b;
}

double rbt_server_metric(const rbt_server *s, const char *name)
{
    rbt_resp m;
    ck_assert_int_eq(rbt_get(NULL, s, "/metrics", &m), 0);
    double v = rbt_metric(m.body, name);
    rbt_resp_free(&m);
    return v;
}
