/* config.c - see config.h. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "raybox.h"

enum opt_type { T_STR, T_BACKEND, T_U64, T_BOOL };

typedef struct opt_desc {
    const char *flag, *env, *def, *help;
    enum opt_type type;
    uint64_t lo, hi;
    size_t offset, size;
} opt_desc;

#define T_OF_STR T_STR
#define T_OF_BACKEND T_BACKEND
#define T_OF_U64 T_U64
#define T_OF_BOOL T_BOOL

static const opt_desc options[] = {
#define RBD_X(f, flag_, env_, type_, def_, lo_, hi_, help_)                   \
    {.flag = flag_, .env = env_, .def = def_, .help = help_,                   \
     .type = T_OF_##type_, .lo = (uint64_t)(lo_), .hi = (uint64_t)(hi_),       \
     .offset = offsetof(rbd_config, f),                                        \
     .size = sizeof(((rbd_config *)0)->f)},
    RBD_OPTIONS(RBD_X)
#undef RBD_X
};
#define N_OPTIONS (sizeof options / sizeof *options)

static const char *type_hint(const opt_desc *o)
{
    switch (o->type) {
    case T_STR: return "TEXT";
    case T_BACKEND: return "auto|cpu|opencl";
    case T_BOOL: return "";
    default: return "N";
    }
}

/* Unsigned decimal with an optional K/M/G (x1024) suffix. */
static int parse_u64(const char *s, uint64_t *out)
{
    if (!isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (*end || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0)
            return *out = 1, 0;
        if (strcasecmp(s, no[i]) == 0)
            return *out = 0, 0;
    }
    return -1;
}

/* Stores text into the option's field; -1 with a message on a bad one. */
static int set_value(rbd_config *c, const opt_desc *o, const char *text,
                     const char *from, char *err, size_t err_len)
{
    char *field = (char *)c + o->offset;
    uint64_t v;
    int b;
    rb_backend_kind kind;
    switch (o->type) {
    case T_STR:
    case T_BACKEND:
        if (strlen(text) >= o->size) {
            snprintf(err, err_len, "%s: --%s is longer than %zu bytes", from,
                     o->flag, o->size - 1);
            return -1;
        }
        if (o->type == T_BACKEND &&
            rb_backend_kind_parse(text, &kind) != RB_OK) {
            snprintf(err, err_len, "%s: --%s takes auto, cpu or opencl, not "
                                   "'%s'", from, o->flag, text);
            return -1;
        }
        memcpy(field, text, strlen(text) + 1);
        return 0;
    case T_U64:
        if (parse_u64(text, &v) || v < o->lo || v > o->hi) {
            snprintf(err, err_len, "%s: --%s takes an integer from %llu to "
                                   "%llu, not '%s'", from, o->flag,
                     (unsigned long long)o->lo, (unsigned long long)o->hi,
                     text);
            return -1;
        }
        memcpy(field, &v, sizeof v);
        return 0;
    case T_BOOL:
        if (parse_bool(text, &b)) {
            snprintf(err, err_len, "%s: --%s takes true or false, not '%s'",
                     from, o->flag, text);
            return -1;
        }
        memcpy(field, &b, sizeof b);
        return 0;
    }
    return -1;
}

void rbd_config_defaults(rbd_config *c)
{
    char err[256];
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (set_value(c, &options[i], options[i].def, "default", err,
                      sizeof err))
            abort(); /* the table itself is wrong: caught by any test */
}

/* Words of text from column 33, lines of at most 79 columns. */
static void wrap(FILE *out, const char *text)
{
    int col = 33;
    while (*text) {
        size_t n = strcspn(text, " ");
        if (col > 33 && col + 1 + (int)n > 79) {
            fprintf(out, "\n%32s", "");
            col = 33;
        }
        fprintf(out, " %.*s", (int)n, text);
        col += 1 + (int)n;
        text += n;
        while (*text == ' ')
            text++;
    }
    fputc('\n', out);
}

void rbd_config_help(FILE *out)
{
    fprintf(out,
            "usage: rayboxd [options]\n"
            "\n"
            "The raybox HTTP service (docs/http.md). Every option can also "
            "be set in\nthe environment variable shown; the command line "
            "wins.\n\noptions:\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_desc *o = &options[i];
        char left[64];
        snprintf(left, sizeof left, "--%s%s%s", o->flag,
                 o->type == T_BOOL ? "" : " ", type_hint(o));
        char range[64] = "";
        if (o->type == T_U64)
            snprintf(range, sizeof range, ", %llu..%llu",
                     (unsigned long long)o->lo, (unsigned long long)o->hi);
        char more[160];
        snprintf(more, sizeof more, "[%s, default %s%s]", o->env,
                 o->def[0] ? o->def : "(empty)", range);
        fprintf(out, "  %-30s", left);
        wrap(out, o->help);
        fprintf(out, "  %-30s", "");
        wrap(out, more);
    }
    fprintf(out, "  %-30s  this text\n", "--help");
    fprintf(out, "  %-30s  the options as a markdown table\n",
            "--help-markdown");
    fprintf(out, "  %-30s  the version\n", "--version");
    fprintf(out, "  %-30s", "--healthcheck [URL]");
    wrap(out, "alone: serve nothing, GET URL (http://HOST:PORT/PATH, HOST "
              "an address literal or localhost; plain HTTP only; default "
              "http://127.0.0.1:$RAYBOX_PORT/v1/health, port 8080 when "
              "unset) within 3 s and exit 0 on a 200, else 1 (a "
              "container's HEALTHCHECK)");
}

void rbd_config_markdown(FILE *out)
{
    fprintf(out, "| option | environment | default | range | meaning |\n"
                 "|---|---|---|---|---|\n");
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt_desc *o = &options[i];
        char range[64] = "";
        if (o->type == T_U64)
            snprintf(range, sizeof range, "%llu..%llu",
                     (unsigned long long)o->lo, (unsigned long long)o->hi);
        else if (o->type == T_BOOL)
            snprintf(range, sizeof range, "true, false");
        else if (o->type == T_BACKEND)
            snprintf(range, sizeof range, "auto, cpu, opencl");
        /* A '|' would end the table cell. */
        const char *hint = o->type == T_BACKEND ? "auto\\|cpu\\|opencl"
                                                : type_hint(o);
        fprintf(out, "| `--%s%s%s` | `%s` | %s%s%s | %s | %s |\n", o->flag,
                o->type == T_BOOL ? "" : " ", hint, o->env,
                o->def[0] ? "`" : "", o->def[0] ? o->def : "(empty)",
                o->def[0] ? "`" : "", range, o->help);
    }
}

static const opt_desc *find_flag(const char *name, size_t len)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (strlen(options[i].flag) == len &&
            strncmp(options[i].flag, name, len) == 0)
            return &options[i];
    return NULL;
}

int rbd_config_load(rbd_config *c, int argc, char **argv, FILE *out,
                    char *err, size_t err_len)
{
    rbd_config_defaults(c);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const char *v = getenv(options[i].env);
        if (v && set_value(c, &options[i], v, options[i].env, err, err_len))
            return -1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            rbd_config_help(out);
            return 1;
        }
        if (strcmp(a, "--help-markdown") == 0) {
            rbd_config_markdown(out);
            return 1;
        }
        if (strcmp(a, "--version") == 0) {
            fprintf(out, "rayboxd %s\n", RB_VERSION_STRING);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, err_len, "unexpected argument '%s' (see --help)",
                     a);
            return -1;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const opt_desc *o = find_flag(name, len);
        if (!o) {
            snprintf(err, err_len, "unknown option '%.*s' (see --help)",
                     (int)len + 2, a);
            return -1;
        }
        const char *val = eq ? eq + 1 : NULL;
        if (!val && o->type == T_BOOL)
            val = "true";
        if (!val) {
            if (i + 1 >= argc) {
                snprintf(err, err_len, "--%s needs a value", o->flag);
                return -1;
            }
            val = argv[++i];
        }
        if (set_value(c, o, val, "command line", err, err_len))
            return -1;
    }
    return 0;
}
