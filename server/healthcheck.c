/*
 * healthcheck.c - rayboxd --healthcheck URL (healthcheck.h): a plain
 * socket, one GET, the status line read back. No libcurl: rayboxd does
 * not link it, and a container image should not need it for this.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "healthcheck.h"
#include "server.h"

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Waits for fd to become ready for events until the deadline: 1 ready,
 * 0 timed out, -1 error. */
static int wait_fd(int fd, short events, long long deadline)
{
    for (;;) {
        long long left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int n = poll(&p, 1, (int)left);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

typedef struct target {
    char host[128]; /* as written, brackets included: the Host header */
    char addr[64];  /* the literal, no brackets */
    unsigned port;
    const char *path;
} target;

static int parse_url(const char *url, target *t, char *why, size_t why_len)
{
    memset(t, 0, sizeof *t);
    if (strncmp(url, "https://", 8) == 0) {
        snprintf(why, why_len, "https is not supported (plain http only; "
                 "see docs/deploy.md)");
        return -1;
    }
    if (strncmp(url, "http://", 7) != 0) {
        snprintf(why, why_len, "the URL must start with http://");
        return -1;
    }
    const char *h = url + 7, *end;
    if (*h == '[') {
        end = strchr(h, ']');
        if (!end) {
            snprintf(why, why_len, "no ']' after the IPv6 address");
            return -1;
        }
        end++;
    } else {
        end = h + strcspn(h, ":/");
    }
    size_t hlen = (size_t)(end - h);
    if (hlen == 0 || hlen >= sizeof t->host) {
        snprintf(why, why_len, "no host, or a host too long");
        return -1;
    }
    memcpy(t->host, h, hlen);
    if (*h == '[') {
        if (hlen - 2 >= sizeof t->addr) {
            snprintf(why, why_len, "IPv6 address too long");
            return -1;
        }
        memcpy(t->addr, h + 1, hlen - 2);
    } else {
        if (hlen >= sizeof t->addr) {
            snprintf(why, why_len, "host too long");
            return -1;
        }
        memcpy(t->addr, h, hlen);
    }
    t->port = 80;
    const char *p = end;
    if (*p == ':') {
        char *after;
        errno = 0;
        unsigned long v = strtoul(p + 1, &after, 10);
        if (after == p + 1 || errno || v == 0 || v > 65535 ||
            (*after && *after != '/')) {
            snprintf(why, why_len, "bad port");
            return -1;
        }
        t->port = (unsigned)v;
        p = after;
    } else if (*p && *p != '/') {
        snprintf(why, why_len, "bad host");
        return -1;
    }
    t->path = *p ? p : "/v1/health";
    for (const char *c = t->path; *c; c++)
        if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f) {
            snprintf(why, why_len, "the path holds a space or control byte");
            return -1;
        }
    return 0;
}

int rbd_healthcheck(const char *url, int timeout_ms)
{
    char why[256] = "";
    char reply[4096];
    size_t got = 0;
    int fd = -1, ok = 0;
    long long deadline = now_ms() + timeout_ms;
    target t;
    if (parse_url(url, &t, why, sizeof why))
        goto out;
    struct sockaddr_storage ss;
    socklen_t len;
    if (server_parse_address(t.addr, (uint16_t)t.port, &ss, &len)) {
        snprintf(why, sizeof why, "host '%s' is not an IPv4 or IPv6 address "
                 "(or localhost)", t.addr);
        goto out;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(why, sizeof why, "socket: %s", strerror(errno));
        goto out;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) && errno != EINPROGRESS) {
        snprintf(why, sizeof why, "connect: %s", strerror(errno));
        goto out;
    }
    int w = wait_fd(fd, POLLOUT, deadline), err = 0;
    socklen_t elen = sizeof err;
    if (w <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) || err) {
        snprintf(why, sizeof why, "connect: %s",
                 w == 0 ? "timed out" : strerror(err ? err : errno));
        goto out;
    }
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.1\r\nHost: %s:%u\r\n"
                     "User-Agent: rayboxd-healthcheck\r\n"
                     "Connection: close\r\n\r\n",
                     t.path, t.host, t.port);
    if (n < 0 || (size_t)n >= sizeof req) {
        snprintf(why, sizeof why, "the URL is too long");
        goto out;
    }
    for (size_t sent = 0; sent < (size_t)n;) {
        ssize_t k = send(fd, req + sent, (size_t)n - sent, MSG_NOSIGNAL);
        if (k > 0) {
            sent += (size_t)k;
            continue;
        }
        if (k < 0 && (errno == EAGAIN || errno == EINTR) &&
            wait_fd(fd, POLLOUT, deadline) > 0)
            continue;
        snprintf(why, sizeof why, "send: %s",
                 k < 0 ? strerror(errno) : "connection closed");
        goto out;
    }
    /* Until the server closes (Connection: close) or the buffer is full:
     * health's answer is far smaller. */
    while (got < sizeof reply - 1) {
        ssize_t k = recv(fd, reply + got, sizeof reply - 1 - got, 0);
        if (k > 0) {
            got += (size_t)k;
            continue;
        }
        if (k == 0)
            break;
        if ((errno == EAGAIN || errno == EINTR)) {
            int r = wait_fd(fd, POLLIN, deadline);
            if (r > 0)
                continue;
            if (r == 0 && got == 0) {
                snprintf(why, sizeof why, "no answer within %d ms",
                         timeout_ms);
                goto out;
            }
            break;
        }
        snprintf(why, sizeof why, "recv: %s", strerror(errno));
        goto out;
    }
    reply[got] = '\0';
    unsigned status = 0;
    if (sscanf(reply, "HTTP/1.%*1[01] %3u", &status) != 1) {
        snprintf(why, sizeof why, "not an HTTP answer");
        goto out;
    }
    const char *body = strstr(reply, "\r\n\r\n");
    size_t line = strcspn(reply, "\r\n");
    if (status == 200) {
        ok = 1;
        printf("%.*s\n%s\n", (int)line, reply, body ? body + 4 : "");
    } else {
        snprintf(why, sizeof why, "%.*s%s%.160s", (int)line, reply,
                 body && body[4] ? ": " : "", body ? body + 4 : "");
    }
out:
    if (fd >= 0)
        close(fd);
    if (!ok)
        fprintf(stderr, "rayboxd --healthcheck %s: %s\n", url, why);
    return ok ? 0 : 1;
}
