/* json_out.c - rows as JSON: the tool, its version and git revision, the
 * summary figures, then one object per row with every field (each row
 * carries its own version and revision, so rows of several files can be
 * merged and still say where they came from). */
#include <math.h>
#include <string.h>

#include "rows.h"

static void str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* JSON has no NaN or infinity: a figure that is not finite is null. */
static void num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

static void field(FILE *f, const char *name, const char *value, int comma)
{
    fprintf(f, "%s\"%s\":", comma ? "," : "", name);
    str(f, value);
}

int rbench_write_json(const rbench_rows *rows, FILE *f)
{
    fputs("{\"tool\":\"raybox-bench\",", f);
    field(f, "version", rows->version, 0);
    field(f, "git", rows->git[0] ? rows->git : "unknown", 1);
    fprintf(f, ",\"summary\":%s,\"rows\":[\n",
            rows->summary[0] ? rows->summary : "{}");
    for (size_t i = 0; i < rows->n; i++) {
        const rbench_row *r = &rows->rows[i];
        fputs(" {", f);
        field(f, "version", r->version, 0);
        field(f, "git", r->git, 1);
        field(f, "backend", r->backend, 1);
        field(f, "device", r->device, 1);
        field(f, "type", r->type, 1);
        field(f, "driver", r->driver, 1);
        field(f, "category", r->category, 1);
        field(f, "test", r->test, 1);
        field(f, "shape", r->shape, 1);
        field(f, "path", r->path, 1);
        fprintf(f, ",\"rays\":%llu,\"boxes\":%llu",
                (unsigned long long)r->rays, (unsigned long long)r->boxes);
        field(f, "size", r->size, 1);
        field(f, "metric", r->metric, 1);
        field(f, "unit", r->unit, 1);
        fputs(",\"value\":", f);
        num(f, r->value);
        fputs(",\"min\":", f);
        num(f, r->min);
        fputs(",\"max\":", f);
        num(f, r->max);
        fprintf(f, ",\"repeats\":%d", r->repeats);
        field(f, "status", r->status, 1);
        field(f, "note", r->note, 1);
        fprintf(f, "}%s\n", i + 1 < rows->n ? "," : "");
    }
    fputs("]}\n", f);
    return ferror(f) ? -1 : 0;
}
