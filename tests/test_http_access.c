/* test_http_access.c - SPEC 11 "Access": bearer tokens of
 * --auth-token-file (401 problem+json with WWW-Authenticate without or
 * with a wrong token, health open, 200 with each valid one, SIGHUP
 * reload, files refused at start), scenes owned by their token (404 for
 * another, listings filtered), HTTPS with --tls-cert/--tls-key on
 * connections the accept thread hands over (and plain HTTP to it closed
 * cleanly), the refusal of a non-loopback --bind without tokens,
 * --allowed-hosts against DNS rebinding (421), and scene ids of 128 random
 * bits. Also auth.c and allowed_hosts.c in-process, including the
 * token comparison's timing. Nothing is sent to a non-loopback address:
 * a server bound to 0.0.0.0 is reached through 127.0.0.1. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "allowed_hosts.h"
#include "auth.h"
#include "http_util.h"
#include "testutil.h"

#define JSON "application/json"
#define TOK_A "tokA-3f9c2e71b0d84a56"
#define TOK_B "tokB-8e1d07c4a25f9b33"

static char dir[64]; /* this run's files */

static void make_dir(void)
{
    if (dir[0])
        return;
    snprintf(dir, sizeof dir, "/tmp/rayboxd-access-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/* dir/name with text in it; the path into path (256 bytes). */
static void write_file(const char *name, const char *text, char *path)
{
    make_dir();
    snprintf(path, 256, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* One request with an optional token (NULL: no Authorization) and an
 * optional Host (NULL: curl's own). h NULL: a fresh plain handle. */
static long req(CURL *h, const char *method, const char *url,
                const char *token, const char *host, const char *body,
                rbt_resp *r)
{
    char auth[400], hosth[300];
    const char *extra[3] = {NULL, NULL, NULL};
    int n = 0;
    if (token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        extra[n++] = auth;
    }
    if (host) {
        snprintf(hosth, sizeof hosth, "Host: %s", host);
        extra[n++] = hosth;
    }
    rbt_http(h, method, url, body ? JSON : NULL, body, body ? strlen(body) : 0,
             NULL, extra, r);
    return r->status;
}

/* The status of one request; the answer dropped. */
static long status_of(const rbt_server *s, const char *method,
                      const char *path, const char *token, const char *body)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", s->base, path);
    rbt_resp r;
    long st = req(NULL, method, url, token, NULL, body, &r);
    rbt_resp_free(&r);
    return st;
}

/* A 401 from the one problem writer, with its challenge. */
static void expect_401(const rbt_resp *r, int invalid_token, const char *what)
{
    char v[256];
    ck_assert_msg(r->status == 401, "%s: %ld %s", what, r->status, r->body);
    ck_assert_msg(rbt_header(r, "Content-Type", v, sizeof v) &&
                      strcmp(v, "application/problem+json") == 0,
                  "%s: content type %s", what, v);
    ck_assert_msg(strstr(r->body, "\"status\":401"), "%s: %s", what, r->body);
    ck_assert_msg(rbt_header(r, "WWW-Authenticate", v, sizeof v) &&
                      strncmp(v, "Bearer", 6) == 0,
                  "%s: no Bearer challenge: %s", what, r->headers);
    ck_assert_msg(!!strstr(v, "invalid_token") == !!invalid_token,
                  "%s: challenge '%s'", what, v);
}

/* The id of a new one-box scene created with token. */
static void make_scene(const rbt_server *s, const char *token, char id[80])
{
    static const char body[] = "{\"dims\":3,\"boxes\":[[0,0,0,1,1,1]]}";
    char url[256];
    snprintf(url, sizeof url, "%s/v1/scenes", s->base);
    rbt_resp r;
    req(NULL, "POST", url, token, NULL, body, &r);
    ck_assert_msg(r.status == 201, "create: %ld %s", r.status, r.body);
    const char *at = strstr(r.body, "\"id\":\"");
    ck_assert_ptr_nonnull(at);
    ck_assert_int_eq(sscanf(at + 6, "%79[^\"]", id), 1);
    rbt_resp_free(&r);
}

static void start_with_tokens(rbt_server *s, const char *extra_flag,
                              char *token_path)
{
    write_file("tokens", "# rayboxd tokens\n\n   \n" TOK_A "\r\n"
                         "  # another comment\n" TOK_B "\n",
               token_path);
    const char *args[] = {"--auth-token-file", token_path, extra_flag, NULL};
    rbt_server_start(s, args);
}

/* ------------------------------------------------------------------------
 * Tokens
 */
START_TEST(test_tokens)
{
    rbt_server s;
    char tp[256], url[512];
    start_with_tokens(&s, NULL, tp);
    rbt_resp r;

    /* Health is open, with or without a token, even a wrong one. */
    ck_assert_int_eq(status_of(&s, "GET", "/v1/health", NULL, NULL), 200);
    ck_assert_int_eq(status_of(&s, "GET", "/v1/health", "nope", NULL), 200);

    /* Without a token, every other route and any path is 401. */
    static const char *const paths[] = {"/v1/scenes", "/v1/devices",
                                        "/metrics", "/v1/scenes/abc",
                                        "/no/such/path"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        snprintf(url, sizeof url, "%s%s", s.base, paths[i]);
        req(NULL, "GET", url, NULL, NULL, NULL, &r);
        expect_401(&r, 0, paths[i]);
        rbt_resp_free(&r);
    }
    /* A body on its way: refused from the headers, nothing computed. */
    snprintf(url, sizeof url, "%s/v1/intersect", s.base);
    const char *q = "{\"rays\":[[0,0,0,1,0,0]],\"boxes\":[[1,-1,-1,2,1,1]]}";
    req(NULL, "POST", url, NULL, NULL, q, &r);
    expect_401(&r, 0, "POST /v1/intersect");
    ck_assert_ptr_null(strstr(r.body, "t_enter"));
    rbt_resp_free(&r);

    /* Wrong tokens: another string, a prefix, a longer one, one byte
     * changed at the end or the start, another scheme, too long. */
    char longer[600];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    const char *wrong[] = {"nope", "tokA-3f9c2e71b0d84a5", TOK_A "x",
                           "tokA-3f9c2e71b0d84a57", "xokA-3f9c2e71b0d84a56",
                           longer};
    snprintf(url, sizeof url, "%s/v1/scenes", s.base);
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++) {
        req(NULL, "GET", url, wrong[i], NULL, NULL, &r);
        expect_401(&r, 1, wrong[i]);
        rbt_resp_free(&r);
    }
    const char *basic[] = {"Authorization: Basic " TOK_A, NULL};
    rbt_http(NULL, "GET", url, NULL, NULL, 0, NULL, basic, &r);
    expect_401(&r, 0, "Basic"); /* RFC 6750 3.1: not a bearer token */
    ck_assert_ptr_nonnull(strstr(r.body, "needs Authorization: Bearer"));
    rbt_resp_free(&r);

    /* Each valid token: 200 on every route (the scheme is
     * case-insensitive). */
    const char *good[] = {TOK_A, TOK_B};
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(status_of(&s, "GET", "/v1/scenes", good[k], NULL),
                         200);
        ck_assert_int_eq(status_of(&s, "GET", "/v1/devices", good[k], NULL),
                         200);
        ck_assert_int_eq(status_of(&s, "GET", "/metrics", good[k], NULL),
                         200);
        ck_assert_int_eq(status_of(&s, "POST", "/v1/intersect", good[k], q),
                         200);
        ck_assert_int_eq(status_of(&s, "GET", "/no/such", good[k], NULL),
                         404);
    }
    const char *lower[] = {"Authorization: bearer " TOK_B, NULL};
    rbt_http(NULL, "GET", url, NULL, NULL, 0, NULL, lower, &r);
    ck_assert_int_eq(r.status, 200);
    rbt_resp_free(&r);

    /* The log names neither token. */
    char *log = rbt_server_log(&s);
    ck_assert_ptr_nonnull(log);
    ck_assert_msg(strstr(log, "\"tokens\":2"), "%s", log);
    ck_assert_ptr_null(strstr(log, TOK_A));
    ck_assert_ptr_null(strstr(log, TOK_B));
    free(log);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

START_TEST(test_metrics_public)
{
    rbt_server s;
    char tp[256];
    start_with_tokens(&s, "--metrics-public", tp);
    ck_assert_int_eq(status_of(&s, "GET", "/metrics", NULL, NULL), 200);
    ck_assert_int_eq(status_of(&s, "GET", "/v1/scenes", NULL, NULL), 401);
    ck_assert_int_eq(status_of(&s, "GET", "/v1/devices", NULL, NULL), 401);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

/* SIGHUP reads the file again: a token taken out is refused, a new one
 * accepted, one that stays keeps its scenes; a broken file keeps the
 * tokens in force. */
START_TEST(test_reload)
{
    rbt_server s;
    char tp[256], path[128], id[80];
    start_with_tokens(&s, NULL, tp);
    make_scene(&s, TOK_A, id);
    snprintf(path, sizeof path, "/v1/scenes/%s", id);

    write_file("tokens", TOK_A "\ntokC-new\n", tp);
    kill(s.pid, SIGHUP);
    int seen = 0;
    for (int i = 0; i < 200 && !seen; i++) {
        char *log = rbt_server_log(&s);
        seen = log && strstr(log, "\"msg\":\"tokens reloaded\",\"tokens\":2");
        free(log);
        if (!seen)
            nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    ck_assert_msg(seen, "no reload in the log");
    ck_assert_int_eq(status_of(&s, "GET", "/v1/scenes", TOK_B, NULL), 401);
    ck_assert_int_eq(status_of(&s, "GET", "/v1/scenes", "tokC-new", NULL),
                     200);
    ck_assert_int_eq(status_of(&s, "GET", path, TOK_A, NULL), 200);
    ck_assert_int_eq(status_of(&s, "GET", path, "tokC-new", NULL), 404);

    write_file("tokens", "a token with spaces\n", tp);
    kill(s.pid, SIGHUP);
    seen = 0;
    for (int i = 0; i < 200 && !seen; i++) {
        char *log = rbt_server_log(&s);
        seen = log && strstr(log, "tokens not reloaded");
        free(log);
        if (!seen)
            nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    ck_assert_msg(seen, "no refused reload in the log");
    ck_assert_int_eq(status_of(&s, "GET", "/v1/scenes", "tokC-new", NULL),
                     200);
    ck_assert_int_eq(status_of(&s, "GET", path, TOK_A, NULL), 200);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

/* rayboxd with args that must not start: the exit status, with what it
 * said in out. timeout(1) ends one that started after all (124). */
static int refused_start(const char *args, char *out, size_t cap)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "timeout 20 '%s' --port 0 --backend cpu %s "
             "2>&1", RAYBOXD, args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(test_token_file_refused)
{
    char path[256], args[512], out[4096];
    struct {
        const char *text, *says;
    } bad[] = {
        {"", "holds no token"},
        {"# only a comment\n\n  \n", "holds no token"},
        {"good-token\nsecret with-space\n", "line 2: a token may hold no"},
        {"good-token\nsecret\x01" "ctl\n", "line 2: a token may hold no"},
        {"tab\tinside\n", "line 1: a token may hold no"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        write_file("bad-tokens", bad[i].text, path);
        snprintf(args, sizeof args, "--auth-token-file '%s'", path);
        int st = refused_start(args, out, sizeof out);
        ck_assert_msg(st == 2, "case %zu: status %d: %s", i, st, out);
        ck_assert_msg(strstr(out, bad[i].says), "case %zu: %s", i, out);
        ck_assert_msg(!strstr(out, "secret"), "the token was echoed: %s",
                      out);
    }
    snprintf(args, sizeof args, "--auth-token-file '%s/none'", dir);
    ck_assert_int_eq(refused_start(args, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "cannot read --auth-token-file"), "%s", out);
    if (geteuid() != 0) { /* root reads a file of mode 000 anyway */
        write_file("locked", "tok\n", path);
        chmod(path, 0);
        snprintf(args, sizeof args, "--auth-token-file '%s'", path);
        ck_assert_int_eq(refused_start(args, out, sizeof out), 2);
        ck_assert_msg(strstr(out, "Permission denied"), "%s", out);
    }
}
END_TEST

/* ------------------------------------------------------------------------
 * Ownership
 */
START_TEST(test_ownership)
{
    rbt_server s;
    char tp[256], id[80], other[80], path[160], ipath[200], url[512];
    start_with_tokens(&s, NULL, tp);
    make_scene(&s, TOK_A, id);
    make_scene(&s, TOK_B, other);
    snprintf(path, sizeof path, "/v1/scenes/%s", id);
    snprintf(ipath, sizeof ipath, "/v1/scenes/%s/intersect", id);
    const char *patch = "{\"append\":[[2,2,2,3,3,3]]}";
    const char *q = "{\"rays\":[[-1,0.5,0.5,1,0,0]]}";
    char qs[300];
    snprintf(qs, sizeof qs,
             "{\"scene\":\"%s\",\"rays\":[[-1,0.5,0.5,1,0,0]]}", id);

    /* B: A's scene does not exist, whatever B does to it. */
    rbt_resp r, nx;
    snprintf(url, sizeof url, "%s%s", s.base, path);
    req(NULL, "GET", url, TOK_B, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 404);
    /* ... and looks exactly like an id that never was (but for it). */
    snprintf(url, sizeof url, "%s/v1/scenes/00000000000000000000000000000000",
             s.base);
    req(NULL, "GET", url, TOK_B, NULL, NULL, &nx);
    ck_assert_int_eq(nx.status, 404);
    ck_assert_ptr_nonnull(strstr(r.body, id));
    ck_assert_uint_eq(r.len, nx.len);
    rbt_resp_free(&r);
    rbt_resp_free(&nx);
    ck_assert_int_eq(status_of(&s, "PATCH", path, TOK_B, patch), 404);
    ck_assert_int_eq(status_of(&s, "POST", ipath, TOK_B, q), 404);
    ck_assert_int_eq(status_of(&s, "POST", "/v1/intersect", TOK_B, qs), 404);
    ck_assert_int_eq(status_of(&s, "DELETE", path, TOK_B, NULL), 404);

    /* Listings: each sees its own. */
    snprintf(url, sizeof url, "%s/v1/scenes", s.base);
    req(NULL, "GET", url, TOK_B, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_null(strstr(r.body, id));
    ck_assert_ptr_nonnull(strstr(r.body, other));
    ck_assert_ptr_nonnull(strstr(r.body, "\"count\":1"));
    rbt_resp_free(&r);
    req(NULL, "GET", url, TOK_A, NULL, NULL, &r);
    ck_assert_ptr_nonnull(strstr(r.body, id));
    ck_assert_ptr_null(strstr(r.body, other));
    ck_assert_ptr_nonnull(strstr(r.body, "\"count\":1"));
    rbt_resp_free(&r);

    /* A: all of it works, untouched by B's tries. */
    ck_assert_int_eq(status_of(&s, "GET", path, TOK_A, NULL), 200);
    ck_assert_int_eq(status_of(&s, "POST", ipath, TOK_A, q), 200);
    ck_assert_int_eq(status_of(&s, "POST", "/v1/intersect", TOK_A, qs), 200);
    snprintf(url, sizeof url, "%s%s", s.base, path);
    req(NULL, "PATCH", url, TOK_A, NULL, patch, &r);
    ck_assert_msg(r.status == 200 && strstr(r.body, "\"version\":2"),
                  "%ld %s", r.status, r.body);
    rbt_resp_free(&r);
    ck_assert_int_eq(status_of(&s, "DELETE", path, TOK_A, NULL), 204);
    ck_assert_int_eq(status_of(&s, "GET", path, TOK_A, NULL), 404);
    snprintf(path, sizeof path, "/v1/scenes/%s", other);
    ck_assert_int_eq(status_of(&s, "GET", path, TOK_B, NULL), 200);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

/* Without tokens scenes are shared, as before. */
START_TEST(test_no_tokens_shared)
{
    rbt_server s;
    rbt_server_start(&s, NULL);
    char id[80], path[160];
    make_scene(&s, NULL, id);
    snprintf(path, sizeof path, "/v1/scenes/%s", id);
    ck_assert_int_eq(status_of(&s, "GET", path, NULL, NULL), 200);
    /* A token sent to a server without tokens changes nothing. */
    ck_assert_int_eq(status_of(&s, "GET", path, "whatever", NULL), 200);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

/* ------------------------------------------------------------------------
 * TLS
 */
static void make_cert(char *cert, char *key)
{
    make_dir();
    snprintf(cert, 256, "%s/cert.pem", dir);
    snprintf(key, 256, "%s/key.pem", dir);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt "
             "ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=localhost "
             "-addext subjectAltName=IP:127.0.0.1,DNS:localhost "
             "-keyout '%s' -out '%s' >/dev/null 2>&1",
             key, cert);
    int st = system(cmd);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "openssl could not make a certificate (Makefile DEPS "
                  "installs openssl): status %d", st);
}

START_TEST(test_tls)
{
    char cert[256], key[256], url[512], id[80];
    make_cert(cert, key);
    const char *args[] = {"--tls-cert", cert, "--tls-key", key, NULL};
    rbt_server s;
    rbt_server_start(&s, args);
    char *log = rbt_server_log(&s);
    ck_assert_msg(log && strstr(log, "\"tls\":true"), "%s", log);
    free(log);

    CURL *h = curl_easy_init();
    curl_easy_setopt(h, CURLOPT_CAINFO, cert);
    rbt_resp r;
    const char *base[] = {"https://127.0.0.1", "https://localhost"};
    for (int k = 0; k < 2; k++) {
        snprintf(url, sizeof url, "%s:%d/v1/health", base[k], s.port);
        req(h, "GET", url, NULL, NULL, NULL, &r);
        ck_assert_msg(r.status == 200 && strstr(r.body, "\"status\":\"ok\""),
                      "%s: %ld %s", url, r.status, r.body);
        rbt_resp_free(&r);
    }
    long ver = 0;
    curl_easy_getinfo(h, CURLINFO_SSL_VERIFYRESULT, &ver);
    ck_assert_int_eq(ver, 0); /* the certificate checked out */
    /* A scene and a query: suspend and resume on a TLS connection. */
    snprintf(url, sizeof url, "https://127.0.0.1:%d/v1/scenes", s.port);
    req(h, "POST", url, NULL, NULL, "{\"boxes\":[[0,0,0,1,1,1]]}", &r);
    ck_assert_int_eq(r.status, 201);
    ck_assert_int_eq(sscanf(strstr(r.body, "\"id\":\"") + 6, "%79[^\"]", id),
                     1);
    rbt_resp_free(&r);
    snprintf(url, sizeof url, "https://127.0.0.1:%d/v1/scenes/%s/intersect",
             s.port, id);
    for (int i = 0; i < 5; i++) { /* keep-alive, several requests */
        req(h, "POST", url, NULL, NULL, "{\"rays\":[[-1,0.5,0.5,1,0,0]]}",
            &r);
        ck_assert_msg(r.status == 200 && strstr(r.body, "\"t_enter\":[1.0]"),
                      "%ld %s", r.status, r.body);
        rbt_resp_free(&r);
    }

    /* Plain HTTP to the TLS port: no HTTP answer, the connection closed
     * at once, and the server goes on serving. */
    double t0 = now_ms();
    int rc = rbt_get(NULL, &s, "/v1/health", &r);
    ck_assert_msg(rc != 0 && r.status == 0, "plain HTTP got %ld", r.status);
    rbt_resp_free(&r);
    static const char plain[] = "GET /v1/health HTTP/1.1\r\nHost: localhost"
                                "\r\n\r\n";
    char out[2048];
    int closed = 0;
    rbt_raw(s.port, plain, sizeof plain - 1, 0, out, sizeof out, 3000,
            &closed);
    ck_assert_msg(closed, "plain HTTP left open");
    ck_assert_ptr_null(strstr(out, "HTTP/1.1"));
    ck_assert_msg(now_ms() - t0 < 2500, "%.0f ms", now_ms() - t0);
    snprintf(url, sizeof url, "https://127.0.0.1:%d/v1/health", s.port);
    req(h, "GET", url, NULL, NULL, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    rbt_resp_free(&r);

    /* Without the certificate the client refuses it (it is self-signed):
     * what the server presents is that certificate. */
    CURL *strict = curl_easy_init();
    curl_easy_setopt(strict, CURLOPT_CAINFO, "/dev/null");
    rc = req(strict, "GET", url, NULL, NULL, NULL, &r) == 200;
    ck_assert_int_eq(rc, 0);
    rbt_resp_free(&r);
    curl_easy_cleanup(strict);
    curl_easy_cleanup(h);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

START_TEST(test_tls_refused)
{
    char cert[256], key[256], args[1024], out[4096], notpem[256];
    make_cert(cert, key);
    snprintf(args, sizeof args, "--tls-cert '%s'", cert);
    ck_assert_int_eq(refused_start(args, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "--tls-key is missing"), "%s", out);
    snprintf(args, sizeof args, "--tls-key '%s'", key);
    ck_assert_int_eq(refused_start(args, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "--tls-cert is missing"), "%s", out);
    snprintf(args, sizeof args, "--tls-cert '%s' --tls-key '%s/none'", cert,
             dir);
    ck_assert_int_eq(refused_start(args, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "cannot read --tls-key"), "%s", out);
    write_file("notpem", "hello\n", notpem);
    snprintf(args, sizeof args, "--tls-cert '%s' --tls-key '%s'", notpem,
             key);
    ck_assert_int_eq(refused_start(args, out, sizeof out), 2);
    ck_assert_msg(strstr(out, "is not a PEM file"), "%s", out);
}
END_TEST

/* ------------------------------------------------------------------------
 * Binding and Host
 */
START_TEST(test_bind)
{
    char out[4096], tp[256], args[512];
    ck_assert_int_eq(refused_start("--bind 0.0.0.0", out, sizeof out), 2);
    ck_assert_msg(strstr(out, "refusing to listen on 0.0.0.0 without "
                              "--auth-token-file"), "%s", out);
    ck_assert_msg(strstr(out, "--insecure"), "%s", out);
    /* One line says it. */
    const char *nl = strchr(out, '\n');
    ck_assert_msg(nl && !strchr(nl + 1, '\n'), "%s", out);

    /* With --insecure it starts; reached through loopback, and bound
     * elsewhere with no --allowed-hosts any Host passes. */
    rbt_server s;
    const char *insecure[] = {"--bind", "0.0.0.0", "--insecure", NULL};
    rbt_server_start(&s, insecure);
    char url[256];
    snprintf(url, sizeof url, "%s/v1/health", s.base);
    rbt_resp r;
    ck_assert_int_eq(req(NULL, "GET", url, NULL, "rayboxd.example", NULL, &r),
                     200);
    rbt_resp_free(&r);
    ck_assert_int_eq(rbt_server_stop(&s), 0);

    /* With tokens it starts without --insecure. */
    write_file("tokens", TOK_A "\n", tp);
    const char *tokens[] = {"--bind", "0.0.0.0", "--auth-token-file", tp,
                            NULL};
    rbt_server_start(&s, tokens);
    ck_assert_int_eq(status_of(&s, "GET", "/v1/scenes", TOK_A, NULL), 200);
    ck_assert_int_eq(status_of(&s, "GET", "/v1/scenes", NULL, NULL), 401);
    ck_assert_int_eq(rbt_server_stop(&s), 0);

    /* All of 127.0.0.0/8 is loopback. */
    const char *lo2[] = {"--bind", "127.0.0.2", NULL};
    rbt_server_start(&s, lo2);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
    snprintf(args, sizeof args, "--bind 10.255.255.1");
    int st = refused_start(args, out, sizeof out);
    ck_assert_msg(st == 2 && strstr(out, "refusing to listen"), "%d %s", st,
                  out);
}
END_TEST

static long host_status(const rbt_server *s, const char *host,
                        const char *token)
{
    char url[256];
    snprintf(url, sizeof url, "%s/v1/health", s->base);
    rbt_resp r;
    long st = req(NULL, "GET", url, token, host, NULL, &r);
    if (st == 421) {
        char v[128];
        ck_assert_msg(rbt_header(&r, "Content-Type", v, sizeof v) &&
                          strcmp(v, "application/problem+json") == 0,
                      "421 as %s", v);
        ck_assert_ptr_nonnull(strstr(r.body, "--allowed-hosts"));
    }
    rbt_resp_free(&r);
    return st;
}

START_TEST(test_allowed_hosts_default)
{
    rbt_server s;
    rbt_server_start(&s, NULL);
    char h[128];
    static const char *const bad[] = {"evil.example", "evil.example:80",
                                      "localhost.evil.example", "127.0.0.2",
                                      "[::2]", "localhost:99999",
                                      "localhost:x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(host_status(&s, bad[i], NULL) == 421, "%s", bad[i]);
    static const char *const good[] = {"localhost", "LocalHost",
                                       "localhost.", "127.0.0.1", "[::1]",
                                       "::1"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        ck_assert_msg(host_status(&s, good[i], NULL) == 200, "%s", good[i]);
    snprintf(h, sizeof h, "localhost:%d", s.port);
    ck_assert_int_eq(host_status(&s, h, NULL), 200);
    snprintf(h, sizeof h, "[::1]:%d", s.port);
    ck_assert_int_eq(host_status(&s, h, NULL), 200);
    /* curl's own Host, 127.0.0.1:PORT */
    ck_assert_int_eq(host_status(&s, NULL, NULL), 200);

    /* HTTP/1.0 without Host passes; HTTP/1.1 with a rebinding Host does
     * not, on any route. */
    static const char ten[] = "GET /v1/health HTTP/1.0\r\n\r\n";
    char out[4096];
    int closed;
    rbt_raw(s.port, ten, sizeof ten - 1, 0, out, sizeof out, 3000, &closed);
    ck_assert_msg(strncmp(out, "HTTP/1.", 7) == 0 && atoi(out + 9) == 200,
                  "%s", out);
    static const char evil[] = "POST /v1/scenes HTTP/1.1\r\nHost: evil.example"
                               "\r\nContent-Type: application/json\r\n"
                               "Content-Length: 25\r\n\r\n"
                               "{\"boxes\":[[0,0,0,1,1,1]]}";
    rbt_raw(s.port, evil, sizeof evil - 1, 0, out, sizeof out, 3000, &closed);
    ck_assert_msg(strncmp(out, "HTTP/1.", 7) == 0 && atoi(out + 9) == 421,
                  "%s", out);
    rbt_resp r;
    rbt_get(NULL, &s, "/v1/scenes", &r);
    ck_assert_ptr_nonnull(strstr(r.body, "\"count\":0"));
    rbt_resp_free(&r);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

START_TEST(test_allowed_hosts_list)
{
    rbt_server s;
    char tp[256];
    write_file("tokens", TOK_A "\n", tp);
    const char *args[] = {"--allowed-hosts", "api.example:8443, Good.Example",
                          "--auth-token-file", tp, NULL};
    rbt_server_start(&s, args);
    ck_assert_int_eq(host_status(&s, "api.example:8443", NULL), 200);
    ck_assert_int_eq(host_status(&s, "good.example:1234", NULL), 200);
    ck_assert_int_eq(host_status(&s, "good.example", NULL), 200);
    ck_assert_int_eq(host_status(&s, "api.example:80", NULL), 421);
    ck_assert_int_eq(host_status(&s, "api.example", NULL), 421);
    /* The list replaces the loopback default. */
    ck_assert_int_eq(host_status(&s, "localhost", NULL), 421);
    ck_assert_int_eq(host_status(&s, NULL, NULL), 421);
    /* The Host check comes before the token: 421, not 401. */
    char url[256];
    snprintf(url, sizeof url, "%s/v1/scenes", s.base);
    rbt_resp r;
    ck_assert_int_eq(req(NULL, "GET", url, NULL, "evil.example", NULL, &r),
                     421);
    rbt_resp_free(&r);
    ck_assert_int_eq(req(NULL, "GET", url, NULL, "good.example", NULL, &r),
                     401);
    rbt_resp_free(&r);
    ck_assert_int_eq(req(NULL, "GET", url, TOK_A, "good.example", NULL, &r),
                     200);
    rbt_resp_free(&r);
    ck_assert_int_eq(rbt_server_stop(&s), 0);

    const char *any[] = {"--allowed-hosts", "*", NULL};
    rbt_server_start(&s, any);
    ck_assert_int_eq(host_status(&s, "evil.example", NULL), 200);
    ck_assert_int_eq(rbt_server_stop(&s), 0);

    char out[4096];
    ck_assert_int_eq(refused_start("--allowed-hosts 'a,,b'", out, sizeof out),
                     2);
    ck_assert_msg(strstr(out, "--allowed-hosts"), "%s", out);
    ck_assert_int_eq(refused_start("--allowed-hosts 'a:port'", out,
                                   sizeof out), 2);
}
END_TEST

/* ------------------------------------------------------------------------
 * Scene ids
 */
static uint64_t unmix(uint64_t x) /* the inverse of splitmix64's mixer */
{
    x ^= x >> 31 ^ x >> 62;
    x *= 0x319642b2d24d8ec3ull;
    x ^= x >> 27 ^ x >> 54;
    x *= 0x96de1b173f119089ull;
    x ^= x >> 30 ^ x >> 60;
    return x;
}

static uint64_t mix(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

enum { N_IDS = 1000 };

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

START_TEST(test_scene_ids)
{
    ck_assert_uint_eq(unmix(mix(12345)), 12345); /* the attack below works */
    const char *args[] = {"--quiet", "--max-scenes", "2000", NULL};
    rbt_server s;
    rbt_server_start(&s, args);
    static char ids[N_IDS][80];
    CURL *h = curl_easy_init(); /* one connection for all */
    char url[256];
    snprintf(url, sizeof url, "%s/v1/scenes", s.base);
    for (int i = 0; i < N_IDS; i++) {
        rbt_resp r;
        req(h, "POST", url, NULL, NULL, "{\"boxes\":[]}", &r);
        ck_assert_int_eq(r.status, 201);
        ck_assert_int_eq(
            sscanf(strstr(r.body, "\"id\":\"") + 6, "%79[^\"]", ids[i]), 1);
        rbt_resp_free(&r);
    }
    curl_easy_cleanup(h);

    int ones[128] = {0};
    for (int i = 0; i < N_IDS; i++) {
        ck_assert_msg(strlen(ids[i]) == 32, "id %s", ids[i]);
        ck_assert_msg(strspn(ids[i], "0123456789abcdef") == 32, "id %s",
                      ids[i]);
        for (int b = 0; b < 128; b++) {
            char c = ids[i][b / 4];
            int v = c <= '9' ? c - '0' : c - 'a' + 10;
            ones[b] += (v >> (3 - b % 4)) & 1;
        }
        /* The old scheme: splitmix64 of (seed + counter), so one id gave
         * the next. Neither half of an id follows from the one before. */
        if (i) {
            for (int half = 0; half < 2; half++) {
                uint64_t a, b;
                char t[17];
                memcpy(t, ids[i - 1] + 16 * half, 16);
                t[16] = '\0';
                a = strtoull(t, NULL, 16);
                memcpy(t, ids[i] + 16 * half, 16);
                b = strtoull(t, NULL, 16);
                uint64_t pre = unmix(a) - 0x9e3779b97f4a7c15ull;
                ck_assert_msg(mix(pre + 1 + 0x9e3779b97f4a7c15ull) != b,
                              "id %d follows from id %d", i, i - 1);
                ck_assert_msg(b != a + 1 && b - a != (uint64_t)0 - 1,
                              "ids %d and %d are neighbours", i - 1, i);
            }
        }
    }
    /* Every bit is 1 in about half the ids (mean 500, sd 16: a bit
     * outside 380..620 is over 7 sd away from chance). */
    for (int b = 0; b < 128; b++)
        ck_assert_msg(ones[b] > 380 && ones[b] < 620, "bit %d is 1 in %d of "
                      "%d ids", b, ones[b], N_IDS);
    /* All distinct, and no common prefixes beyond chance: sorted, the
     * longest prefix two ids share is about log16(N^2/2) = 4.7 digits. */
    char *sorted[N_IDS];
    for (int i = 0; i < N_IDS; i++)
        sorted[i] = ids[i];
    qsort(sorted, N_IDS, sizeof *sorted, by_string);
    size_t longest = 0;
    for (int i = 1; i < N_IDS; i++) {
        ck_assert_msg(strcmp(sorted[i - 1], sorted[i]) != 0, "id %s twice",
                      sorted[i]);
        size_t k = 0;
        while (sorted[i - 1][k] == sorted[i][k])
            k++;
        if (k > longest)
            longest = k;
    }
    ck_assert_msg(longest < 10, "two ids share %zu leading digits", longest);
    /* Nor common suffixes (a counter in the low digits). */
    int same_last = 0;
    for (int i = 1; i < N_IDS; i++)
        same_last += memcmp(ids[i - 1] + 28, ids[i] + 28, 4) == 0;
    ck_assert_int_le(same_last, 3);
    ck_assert_int_eq(rbt_server_stop(&s), 0);
}
END_TEST

/* ------------------------------------------------------------------------
 * auth.c and allowed_hosts.c in-process
 */
START_TEST(test_auth_unit)
{
    char path[256], why[512];
    write_file("unit-tokens", "#c\nalpha\nbeta\nalpha\n\ngamma\r\n", path);
    rbd_auth *a = auth_load(path, why, sizeof why);
    ck_assert_msg(a, "%s", why);
    ck_assert_uint_eq(auth_count(a), 3); /* the repeated alpha once */
    uint64_t oa = auth_check(a, "Bearer alpha");
    uint64_t ob = auth_check(a, "Bearer  beta ");
    uint64_t og = auth_check(a, "BEARER gamma");
    ck_assert(oa && ob && og && oa != ob && ob != og && oa != og);
    ck_assert_uint_eq(auth_check(a, "Bearer alph"), 0);
    ck_assert_uint_eq(auth_check(a, "Bearer alphaa"), 0);
    ck_assert_uint_eq(auth_check(a, "Bearer"), 0);
    ck_assert_uint_eq(auth_check(a, "Bearer "), 0);
    ck_assert_uint_eq(auth_check(a, "Bearealpha"), 0);
    ck_assert_uint_eq(auth_check(a, "alpha"), 0);
    ck_assert_uint_eq(auth_check(a, NULL), 0);
    ck_assert_uint_eq(auth_check(a, "Bearer gamma\r"), 0);
    /* Reload: alpha stays alpha's, beta goes, delta is new. */
    write_file("unit-tokens", "delta\nalpha\n", path);
    ck_assert_int_eq(auth_reload(a, why, sizeof why), 2);
    ck_assert_uint_eq(auth_check(a, "Bearer alpha"), oa);
    ck_assert_uint_eq(auth_check(a, "Bearer beta"), 0);
    uint64_t od = auth_check(a, "Bearer delta");
    ck_assert(od && od != oa && od != ob && od != og);
    write_file("unit-tokens", "", path);
    ck_assert_int_eq(auth_reload(a, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "holds no token"));
    ck_assert_uint_eq(auth_check(a, "Bearer delta"), od);
    auth_destroy(a);

    char big[RBD_TOKEN_MAX + 3];
    memset(big, 'z', RBD_TOKEN_MAX + 1);
    big[RBD_TOKEN_MAX + 1] = '\n';
    big[RBD_TOKEN_MAX + 2] = '\0';
    write_file("unit-tokens", big, path);
    ck_assert_ptr_null(auth_load(path, why, sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "at most"));
}
END_TEST

static double check_ns(rbd_auth *a, const char *header, int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        volatile uint64_t o = 0;
        for (int i = 0; i < 20; i++)
            o += auth_check(a, header);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 +
                    (double)(t1.tv_nsec - t0.tv_nsec);
        if (ns < best)
            best = ns;
    }
    return best / 20;
}

/* The comparison takes as long for a match as for a token wrong in its
 * first byte or its last, and as long for the first token of the file as
 * for the last: no early exit. Fastest of many tries, interleaved, so
 * that other load cancels out; an early-exit comparison differs by a
 * factor of 10 and more. */
START_TEST(test_auth_timing)
{
    char path[256], why[512], text[64 * 40] = "";
    for (int i = 0; i < 40; i++) {
        char line[64];
        snprintf(line, sizeof line, "token-%02d-0123456789abcdef0123456789\n",
                 i);
        strcat(text, line);
    }
    write_file("timing-tokens", text, path);
    rbd_auth *a = auth_load(path, why, sizeof why);
    ck_assert_msg(a, "%s", why);
    const char *h[] = {
        "Bearer token-00-0123456789abcdef0123456789", /* the first, match */
        "Bearer token-39-0123456789abcdef0123456789", /* the last, match */
        "Bearer Xoken-00-0123456789abcdef0123456789", /* first byte off */
        "Bearer token-39-0123456789abcdef012345678X", /* last byte off */
        "Bearer t",                                   /* short */
    };
    enum { K = sizeof h / sizeof *h };
    double best[K];
    for (int k = 0; k < K; k++)
        best[k] = 1e30;
    for (int round = 0; round < 20; round++)
        for (int k = 0; k < K; k++) {
            double t = check_ns(a, h[k], 10);
            if (t < best[k])
                best[k] = t;
        }
    ck_assert_uint_ne(auth_check(a, h[0]), 0);
    ck_assert_uint_ne(auth_check(a, h[1]), 0);
    ck_assert_uint_eq(auth_check(a, h[2]), 0);
    double lo = best[0], hi = best[0];
    for (int k = 1; k < K; k++) {
        if (best[k] < lo)
            lo = best[k];
        if (best[k] > hi)
            hi = best[k];
    }
    ck_assert_msg(hi < 2.0 * lo, "auth_check: %.0f %.0f %.0f %.0f %.0f ns",
                  best[0], best[1], best[2], best[3], best[4]);
    auth_destroy(a);
}
END_TEST

START_TEST(test_hosts_unit)
{
    char why[256], d[256];
    rbd_hosts *h = NULL;
    ck_assert_int_eq(hosts_parse("", 0, &h, why, sizeof why), 0);
    ck_assert_ptr_null(h); /* not loopback, no list: any */
    ck_assert_int_eq(hosts_check(h, "anything", d, sizeof d), 0);
    ck_assert_int_eq(hosts_parse("", 1, &h, why, sizeof why), 0);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(hosts_check(h, "localhost:8080", d, sizeof d), 0);
    ck_assert_int_eq(hosts_check(h, "[::1]:8080", d, sizeof d), 0);
    ck_assert_int_eq(hosts_check(h, "127.0.0.1", d, sizeof d), 0);
    ck_assert_int_eq(hosts_check(h, NULL, d, sizeof d), 0);
    ck_assert_int_eq(hosts_check(h, "evil.example", d, sizeof d), 421);
    ck_assert_int_eq(hosts_check(h, "evil\xff", d, sizeof d), 421);
    ck_assert_ptr_null(strchr(d, '\xff')); /* never echoed */
    ck_assert_int_eq(hosts_check(h, "", d, sizeof d), 421);
    ck_assert_int_eq(hosts_check(h, "[::1", d, sizeof d), 421);
    ck_assert_int_eq(hosts_check(h, "localhost:", d, sizeof d), 421);
    hosts_destroy(h);
    ck_assert_int_eq(hosts_parse("a.b:81,[fe80::1]:9", 1, &h, why,
                                 sizeof why), 0);
    ck_assert_int_eq(hosts_check(h, "A.B:81", d, sizeof d), 0);
    ck_assert_int_eq(hosts_check(h, "a.b:82", d, sizeof d), 421);
    ck_assert_int_eq(hosts_check(h, "[fe80::1]:9", d, sizeof d), 0);
    ck_assert_int_eq(hosts_check(h, "localhost", d, sizeof d), 421);
    hosts_destroy(h);
    ck_assert_int_eq(hosts_parse("x, *", 1, &h, why, sizeof why), 0);
    ck_assert_ptr_null(h);
    ck_assert_int_eq(hosts_parse("x,", 1, &h, why, sizeof why), -1);
    ck_assert_int_eq(hosts_parse("x:70000", 1, &h, why, sizeof why), -1);
    ck_assert_int_eq(hosts_parse("a b", 1, &h, why, sizeof why), -1);
}
END_TEST

int main(void)
{
    curl_global_init(CURL_GLOBAL_ALL);
    Suite *s = suite_create("http_access");
    TCase *tc = tcase_create("http_access");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_auth_unit);
    tcase_add_test(tc, test_auth_timing);
    tcase_add_test(tc, test_hosts_unit);
    tcase_add_test(tc, test_tokens);
    tcase_add_test(tc, test_metrics_public);
    tcase_add_test(tc, test_reload);
    tcase_add_test(tc, test_token_file_refused);
    tcase_add_test(tc, test_ownership);
    tcase_add_test(tc, test_no_tokens_shared);
    tcase_add_test(tc, test_tls);
    tcase_add_test(tc, test_tls_refused);
    tcase_add_test(tc, test_bind);
    tcase_add_test(tc, test_allowed_hosts_default);
    tcase_add_test(tc, test_allowed_hosts_list);
    tcase_add_test(tc, test_scene_ids);
    suite_add_tcase(s, tc);
    int failed = rbt_run_suite(s);
    curl_global_cleanup();
    if (dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", dir);
    }
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
