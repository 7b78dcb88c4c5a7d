/* csv_out.c - rows as CSV (RFC 4180: a header line, fields with commas,
 * quotes or line breaks quoted, quotes doubled). Every line carries the
 * tool version and git revision, like clpeak's result rows. */
#include <math.h>
#include <string.h>

#include "rows.h"

static void cell(FILE *f, const char *s, int last)
{
    if (strpbrk(s, ",\"\r\n")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"')
                fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
    fputc(last ? '\n' : ',', f);
}

static void num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g,", v);
    else
        fputc(',', f);
}

int rbench_write_csv(const rbench_rows *rows, FILE *f)
{
    fputs("tool,version,git,backend,device,type,driver,category,test,shape,"
          "path,rays,boxes,size,metric,unit,value,min,max,repeats,status,"
          "note\n", f);
    for (size_t i = 0; i < rows->n; i++) {
        const rbench_row *r = &rows->rows[i];
        cell(f, "raybox-bench", 0);
        cell(f, r->version, 0);
        cell(f, r->git, 0);
        cell(f, r->backend, 0);
        cell(f, r->device, 0);
        cell(f, r->type, 0);
        cell(f, r->driver, 0);
        cell(f, r->category, 0);
        cell(f, r->test, 0);
        cell(f, r->shape, 0);
        cell(f, r->path, 0);
        fprintf(f, "%llu,%llu,", (unsigned long long)r->rays,
                (unsigned long long)r->boxes);
        cell(f, r->size, 0);
        cell(f, r->metric, 0);
        cell(f, r->unit, 0);
        if (strcmp(r->status, "ok") == 0) {
            num(f, r->value);
            num(f, r->min);
            num(f, r->max);
        } else {
            fputs(",,,", f);
        }
        fprintf(f, "%d,", r->repeats);
        cell(f, r->status, 0);
        cell(f, r->note, 1);
    }
    return ferror(f) ? -1 : 0;
}
