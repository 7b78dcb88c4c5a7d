/* access_log.c - see access_log.h. */
#include "access_log.h"

#include <time.h>
#include <unistd.h>

#include "sbuf.h"

/* RFC 3339, UTC, milliseconds. */
static void timestamp(sbuf *b)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    sbuf_printf(b, "{\"ts\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\"",
                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

static void emit(sbuf *b)
{
    sbuf_add(b, "}\n");
    if (sbuf_failed(b))
        return;
    size_t off = 0;
    while (off < b->len) {
        ssize_t n = write(2, b->data + off, b->len - off);
        if (n <= 0)
            break; /* stderr is gone: nothing useful to do */
        off += (size_t)n;
    }
}

void access_log_request(const rbd_log_request *r)
{
    sbuf b;
    sbuf_init(&b);
    timestamp(&b);
    sbuf_add(&b, ",\"level\":\"info\",\"msg\":\"request\",\"request_id\":");
    sbuf_json_str(&b, r->request_id);
    sbuf_add(&b, ",\"method\":");
    sbuf_json_str(&b, r->method);
    sbuf_add(&b, ",\"path\":");
    sbuf_json_str(&b, r->path);
    sbuf_add(&b, ",\"route\":");
    sbuf_json_str(&b, r->route);
    sbuf_printf(&b, ",\"status\":%d", r->status);
    if (r->outcome) {
        sbuf_add(&b, ",\"outcome\":");
        sbuf_json_str(&b, r->outcome);
    }
    if (r->scene) {
        sbuf_add(&b, ",\"scene\":");
        sbuf_json_str(&b, r->scene);
    }
    sbuf_printf(&b,
                ",\"rays\":%llu,\"boxes\":%llu,\"bytes_in\":%llu,"
                "\"bytes_out\":%llu,\"queue_ms\":%.3f,\"run_ms\":%.3f,"
                "\"duration_ms\":%.3f",
                (unsigned long long)r->rays, (unsigned long long)r->boxes,
                (unsigned long long)r->bytes_in,
                (unsigned long long)r->bytes_out, r->queue_ms, r->run_ms,
                r->duration_ms);
    if (r->inlined)
        sbuf_add(&b, ",\"inline\":true");
    if (r->error) {
        sbuf_add(&b, ",\"error\":");
        sbuf_json_str(&b, r->error);
    }
    emit(&b);
    sbuf_free(&b);
}

void log_event(const char *level, const char *msg, const char *fields)
{
    sbuf b;
    sbuf_init(&b);
    timestamp(&b);
    sbuf_add(&b, ",\"level\":");
    sbuf_json_str(&b, level);
    sbuf_add(&b, ",\"msg\":");
    sbuf_json_str(&b, msg);
    if (fields && fields[0]) {
        sbuf_add(&b, ",");
        sbuf_add(&b, fields);
    }
    emit(&b);
    sbuf_free(&b);
}
