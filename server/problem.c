/* problem.c - see problem.h. */
#include "problem.h"

#include <stdio.h>
#include <string.h>

#include "json_text.h"
#include "raybox.h"

const char *rb_http_reason(int http_status)
{
    switch (http_status) {
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 415: return "Unsupported Media Type";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 507: return "Insufficient Storage";
    default: return "Error";
    }
}

int rb_http_status_of(int status)
{
    switch (status) {
    case RB_OK:
        return 200;
    case RB_EINPUT:
    case RB_EINVAL:
        return 422;
    case RB_ELIMIT:
        return 413;
    case RB_ENOMEM:
    case RB_EDEVMEM:
    case RB_ECANCELED:
        return 503;
    default:
        return 500;
    }
}

size_t rb_problem_write(char *out, size_t cap, int http_status,
                        const char *detail, const char *pointer)
{
    char quoted_ptr[512], quoted_detail[RB_PROBLEM_MAX];
    if (!cap)
        return 0;
    /* The pointer gets a fixed share so that the detail can never push it
     * out, and the rest of the buffer goes to the detail. */
    if (pointer)
        rbj_quote(quoted_ptr, sizeof quoted_ptr, pointer);
    size_t fixed = 128 + (pointer ? strlen(quoted_ptr) : 0);
    size_t room = cap > fixed + 3 ? cap - fixed : 3;
    if (room > sizeof quoted_detail)
        room = sizeof quoted_detail;
    if (detail)
        rbj_quote(quoted_detail, room, detail);
    int n = snprintf(out, cap,
                     "{\"type\":\"about:blank\",\"title\":\"%s\","
                     "\"status\":%d%s%s%s%s}",
                     rb_http_reason(http_status), http_status,
                     detail ? ",\"detail\":" : "", detail ? quoted_detail : "",
                     pointer ? ",\"pointer\":" : "",
                     pointer ? quoted_ptr : "");
    if (n < 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}
