/* compare.c - --compare: the change of every row against a baseline run.
 *
 * Rows match when backend, device, test, shape, path, size and metric are
 * equal. Comparing two GPUs means comparing different device names, so a
 * device of this run that the baseline lacks is paired with a baseline
 * device that this run lacks, of the same backend and type, in the order
 * they appear; each such pairing is printed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rows.h"

typedef struct device_ref {
    const rbench_row *first; /* a row of the device */
    const char *paired;   /* the baseline device name it is compared with */
} device_ref;

typedef struct devices {
    device_ref *v;
    size_t n;
} devices;

static int same_device(const rbench_row *a, const rbench_row *b)
{
    return strcmp(a->backend, b->backend) == 0 &&
           strcmp(a->device, b->device) == 0;
}

/* The devices of a run, in order of first appearance. */
static devices list_devices(const rbench_rows *rows)
{
    devices d = {calloc(rows->n ? rows->n : 1, sizeof(device_ref)), 0};
    if (!d.v) {
        fprintf(stderr, "raybox-bench: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < rows->n; i++) {
        size_t k = 0;
        while (k < d.n && !same_device(d.v[k].first, &rows->rows[i]))
            k++;
        if (k == d.n)
            d.v[d.n++].first = &rows->rows[i];
    }
    return d;
}

static void pair_devices(devices *now, devices *base, FILE *f,
                         rbench_compare_stats *st)
{
    /* Same name first. */
    for (size_t i = 0; i < now->n; i++)
        for (size_t j = 0; j < base->n && !now->v[i].paired; j++)
            if (!base->v[j].paired &&
                same_device(now->v[i].first, base->v[j].first)) {
                now->v[i].paired = base->v[j].first->device;
                base->v[j].paired = now->v[i].first->device;
            }
    /* Then the leftovers, by backend and type. */
    for (size_t i = 0; i < now->n; i++) {
        const rbench_row *a = now->v[i].first;
        for (size_t j = 0; j < base->n && !now->v[i].paired; j++) {
            const rbench_row *b = base->v[j].first;
            if (base->v[j].paired || strcmp(a->backend, b->backend) != 0 ||
                strcmp(a->type, b->type) != 0)
                continue;
            now->v[i].paired = b->device;
            base->v[j].paired = a->device;
            st->paired_devices++;
            fprintf(f, "%s device \"%s\" is compared with baseline device "
                       "\"%s\"\n", a->backend, a->device, b->device);
        }
    }
}

static const char *paired_name(const devices *now, const rbench_row *r)
{
    for (size_t i = 0; i < now->n; i++)
        if (same_device(now->v[i].first, r))
            return now->v[i].paired;
    return NULL;
}

static int same_place(const rbench_row *a, const rbench_row *b,
                      const char *b_device)
{
    return strcmp(a->backend, b->backend) == 0 &&
           strcmp(b_device, b->device) == 0 &&
           strcmp(a->test, b->test) == 0 && strcmp(a->shape, b->shape) == 0 &&
           strcmp(a->path, b->path) == 0 && strcmp(a->size, b->size) == 0 &&
           strcmp(a->metric, b->metric) == 0;
}

static void label(const rbench_row *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s %s%s%s%s%s %s %s", r->backend, r->test,
             r->shape[0] ? "/" : "", r->shape, r->path[0] ? "/" : "",
             r->path, r->size, r->metric);
}

static void print_value(FILE *f, const rbench_row *r)
{
    char v[24];
    if (strcmp(r->status, "ok") != 0) {
        fprintf(f, " %10s", r->status);
        return;
    }
    rbench_human(r->value, v, sizeof v);
    fprintf(f, " %10s", v);
}

void rbench_compare(const rbench_rows *base, const rbench_rows *now,
                 double threshold, FILE *f, rbench_compare_stats *st)
{
    memset(st, 0, sizeof *st);
    devices dn = list_devices(now), db = list_devices(base);
    pair_devices(&dn, &db, f, st);
    char *used = calloc(base->n ? base->n : 1, 1);
    char *alone = calloc(now->n ? now->n : 1, 1); /* rows only now */
    if (!used || !alone) {
        fprintf(stderr, "raybox-bench: out of memory\n");
        exit(1);
    }
    const rbench_row *prev = NULL;
    for (size_t i = 0; i < now->n; i++) {
        const rbench_row *r = &now->rows[i];
        const char *bdev = paired_name(&dn, r);
        const rbench_row *b = NULL;
        for (size_t j = 0; bdev && j < base->n && !b; j++)
            if (!used[j] && same_place(r, &base->rows[j], bdev)) {
                b = &base->rows[j];
                used[j] = 1;
            }
        if (!b) {
            st->only_now++;
            alone[i] = 1;
            continue;
        }
        st->matched++;
        if (!prev || !same_device(prev, r)) {
            fprintf(f, "\n== %s: %s", r->backend, r->device);
            if (strcmp(bdev, r->device) != 0)
                fprintf(f, "  (baseline: %s)", bdev);
            fprintf(f, "\n  %-64s %10s %10s %9s\n", "row", "baseline", "now",
                    "change");
        }
        prev = r;
        char name[160];
        label(r, name, sizeof name);
        fprintf(f, "  %-64s", name);
        print_value(f, b);
        print_value(f, r);
        if (strcmp(r->status, "ok") == 0 && strcmp(b->status, "ok") == 0 &&
            b->value != 0 && isfinite(b->value) && isfinite(r->value)) {
            double change = (r->value - b->value) / fabs(b->value);
            int up = rbench_higher_is_better(r);
            const char *word = "";
            if (change > threshold) {
                word = up ? "  better" : "  worse";
                *(up ? &st->better : &st->worse) += 1;
            } else if (change < -threshold) {
                word = up ? "  worse" : "  better";
                *(up ? &st->worse : &st->better) += 1;
            }
            fprintf(f, " %+8.1f%%%s", 100.0 * change, word);
        }
        fputc('\n', f);
    }
    /* Rows on one side only, so a shrunken run cannot pass for a match. */
    if (st->only_now) {
        fprintf(f, "\nrows only in this run (%zu):\n", st->only_now);
        for (size_t i = 0; i < now->n; i++) {
            if (!alone[i])
                continue;
            char name[160];
            label(&now->rows[i], name, sizeof name);
            fprintf(f, "  %s: %s\n", now->rows[i].device, name);
        }
    }
    for (size_t j = 0; j < base->n; j++)
        st->only_base += !used[j];
    if (st->only_base) {
        fprintf(f, "\nrows only in the baseline (%zu):\n", st->only_base);
        for (size_t j = 0; j < base->n; j++) {
            if (used[j])
                continue;
            char name[160];
            label(&base->rows[j], name, sizeof name);
            fprintf(f, "  %s: %s\n", base->rows[j].device, name);
        }
    }
    fprintf(f, "\n%zu rows compared: %zu better, %zu worse (beyond %.0f%%); "
               "%zu only here, %zu only in the baseline\n",
            st->matched, st->better, st->worse, 100.0 * threshold,
            st->only_now, st->only_base);
    free(used);
    free(alone);
    free(dn.v);
    free(db.v);
}
