/* plot.c - --plot DIR: PNG charts drawn by gnuplot (Debian: gnuplot-nox).
 *
 *   rate-MODE.png   rays/s against rays per batch (log-log), one panel per
 *                   shape (inline boxes, each scene shape), one line per
 *                   device and path (kernel, e2e, http), error bars from
 *                   the spread over repeats;
 *   bound-MODE.png  the fraction of the device's bandwidth bound, same
 *                   layout.
 *
 * The data (.dat) and gnuplot scripts (.gp) stay beside the PNGs, so a
 * chart can be restyled without measuring again. Without gnuplot, --plot
 * fails before anything is measured (rbench_plot_check). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define MAX_SERIES 64
#define MAX_PANELS 8

int rbench_plot_check(char *why, size_t len)
{
    const char *path = getenv("PATH");
    char dir[4096];
    while (path && *path) {
        size_t n = strcspn(path, ":");
        snprintf(dir, sizeof dir, "%.*s/gnuplot", (int)n, path);
        if (n && access(dir, X_OK) == 0)
            return 0;
        path += n + (path[n] == ':');
    }
    snprintf(why, len, "--plot needs gnuplot, which is not on PATH (Debian: "
                       "apt-get install gnuplot-nox; `make bench` installs "
                       "it)");
    return -1;
}

static int plotted(const rbench_row *r)
{
    return strcmp(r->status, "ok") == 0 && r->rays > 0 &&
           (strcmp(r->category, "modes") == 0 ||
            strcmp(r->category, "scenes") == 0 ||
            strcmp(r->category, "http") == 0);
}

/* The files rows were loaded from, to label runs of one device apart. */
static const char *const *plot_sources;
static size_t plot_n_sources;

/* Distinct values of a row field among plotted rows of `mode`. */
typedef const char *(*field_fn)(const rbench_row *r, char *buf, size_t len);

static const char *shape_of(const rbench_row *r, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    return r->shape;
}

static const char *series_of(const rbench_row *r, char *buf, size_t len)
{
    if (plot_n_sources > 1 && r->source >= 1 &&
        (size_t)r->source <= plot_n_sources) {
        const char *file = plot_sources[r->source - 1];
        const char *base = strrchr(file, '/');
        snprintf(buf, len, "%.16s %.100s (%.8s) [%.40s]", r->backend, r->device,
                 r->path, base ? base + 1 : file);
    } else {
        snprintf(buf, len, "%s %s (%s)", r->backend, r->device, r->path);
    }
    return buf;
}

static int by_rays(const void *a, const void *b)
{
    uint64_t x = (*(const rbench_row *const *)a)->rays;
    uint64_t y = (*(const rbench_row *const *)b)->rays;
    return x < y ? -1 : x > y;
}

static size_t distinct(const rbench_rows *rows, const char *mode,
                       const char *metric, field_fn fn, char out[][192],
                       size_t cap)
{
    size_t n = 0;
    char buf[192];
    for (size_t i = 0; i < rows->n; i++) {
        const rbench_row *r = &rows->rows[i];
        if (!plotted(r) || strcmp(r->test, mode) != 0 ||
            strcmp(r->metric, metric) != 0)
            continue;
        const char *v = fn(r, buf, sizeof buf);
        size_t k = 0;
        while (k < n && strcmp(out[k], v) != 0)
            k++;
        if (k == n && n < cap)
            snprintf(out[n++], 192, "%s", v);
    }
    return n;
}

/* gnuplot single-quoted text: a quote is doubled. */
static void gp_str(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        fputc(*s, f);
    }
    fputc('\'', f);
}

static int write_chart(const rbench_rows *rows, const char *dir,
                       const char *mode, const char *metric,
                       const char *prefix, const char *ylabel, int logy,
                       char *err, size_t len)
{
    static char shapes[MAX_PANELS][192], series[MAX_SERIES][192];
    size_t ns = distinct(rows, mode, metric, shape_of, shapes, MAX_PANELS);
    size_t nl = distinct(rows, mode, metric, series_of, series, MAX_SERIES);
    if (ns == 0 || nl == 0)
        return 0;
    char gp_path[4096], png[4096];
    snprintf(gp_path, sizeof gp_path, "%s/%s-%s.gp", dir, prefix, mode);
    snprintf(png, sizeof png, "%s/%s-%s.png", dir, prefix, mode);
    FILE *gp = fopen(gp_path, "w");
    if (!gp) {
        snprintf(err, len, "%s: %s", gp_path, strerror(errno));
        return -1;
    }
    int cols = ns < 2 ? 1 : 2;
    int lines = (int)((ns + (size_t)cols - 1) / (size_t)cols);
    fprintf(gp, "set terminal pngcairo noenhanced size %d,%d font ',9'\n",
            640 * cols, 440 * lines);
    fputs("set output ", gp);
    gp_str(gp, png);
    fprintf(gp, "\nset multiplot layout %d,%d title ", lines, cols);
    char title[128];
    snprintf(title, sizeof title, "raybox-bench: %s, %s", mode, ylabel);
    gp_str(gp, title);
    fprintf(gp, "\nset logscale x 2\nset format x '%%.0b%%B'\n"
                "set xlabel 'rays per batch'\nset ylabel ");
    gp_str(gp, ylabel);
    fprintf(gp, "\n%s\nset grid\nset key top left font ',8'\n",
            logy ? "set logscale y\nset format y '%.0s%c'" : "set yrange [0:*]");
    for (size_t p = 0; p < ns; p++) {
        char dat[4096];
        snprintf(dat, sizeof dat, "%s/%s-%s-%s.dat", dir, prefix, mode,
                 shapes[p]);
        FILE *d = fopen(dat, "w");
        if (!d) {
            snprintf(err, len, "%s: %s", dat, strerror(errno));
            fclose(gp);
            return -1;
        }
        fputs("set title ", gp);
        char ptitle[220];
        if (strcmp(shapes[p], "inline") == 0)
            snprintf(ptitle, sizeof ptitle, "boxes sent with each query");
        else
            snprintf(ptitle, sizeof ptitle, "scene: %s", shapes[p]);
        gp_str(gp, ptitle);
        fputs("\nplot ", gp);
        int index = 0, first = 1;
        const rbench_row **pts = malloc((rows->n ? rows->n : 1) * sizeof *pts);
        if (!pts) {
            snprintf(err, len, "out of memory");
            fclose(d);
            fclose(gp);
            return -1;
        }
        for (size_t s = 0; s < nl; s++) {
            size_t np = 0;
            char buf[192];
            for (size_t i = 0; i < rows->n; i++) {
                const rbench_row *r = &rows->rows[i];
                if (plotted(r) && strcmp(r->test, mode) == 0 &&
                    strcmp(r->metric, metric) == 0 &&
                    strcmp(r->shape, shapes[p]) == 0 &&
                    strcmp(series_of(r, buf, sizeof buf), series[s]) == 0)
                    pts[np++] = r;
            }
            if (!np)
                continue;
            /* Lines join sizes in order, whatever order they ran in. */
            qsort(pts, np, sizeof *pts, by_rays);
            for (size_t i = 0; i < np; i++)
                fprintf(d, "%llu %.9g %.9g %.9g\n",
                        (unsigned long long)pts[i]->rays, pts[i]->value,
                        pts[i]->min, pts[i]->max);
            fputs("\n\n", d);
            fprintf(gp, "%s", first ? "" : ", \\\n     ");
            gp_str(gp, dat);
            fprintf(gp, " index %d using 1:2:3:4 with yerrorlines title ",
                    index++);
            gp_str(gp, series[s]);
            first = 0;
        }
        free(pts);
        fputc('\n', gp);
        fclose(d);
    }
    fputs("unset multiplot\n", gp);
    fclose(gp);
    char cmd[8400];
    snprintf(cmd, sizeof cmd, "gnuplot '%s'", gp_path);
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(err, len, "gnuplot failed on %s (exit status %d)", gp_path,
                 st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st));
        return -1;
    }
    return 1;
}

int rbench_plot(const rbench_rows *rows, const char *const *sources,
             size_t n_sources, const char *dir, char *err, size_t len)
{
    plot_sources = sources;
    plot_n_sources = n_sources;
    if (strchr(dir, '\'')) {
        snprintf(err, len, "--plot: a directory name with a quote is not "
                           "supported");
        return -1;
    }
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, len, "%s: %s", dir, strerror(errno));
        return -1;
    }
    static const char *const modes[] = {"pairs", "nearest", "any", "count",
                                        "all"};
    int charts = 0;
    for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
        int a = write_chart(rows, dir, modes[m], "rays_per_s", "rate",
                            "rays/s", 1, err, len);
        int b = write_chart(rows, dir, modes[m], "fraction_of_bound", "bound",
                            "fraction of the bandwidth bound", 0, err, len);
        if (a < 0 || b < 0)
            return -1;
        charts += a + b;
    }
    if (charts == 0) {
        snprintf(err, len, "--plot: no measured rows to plot");
        return -1;
    }
    return charts;
}
