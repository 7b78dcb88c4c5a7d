/* json_in.c - reads rows back from a file rbench_write_json wrote (a
 * baseline for --compare, or --from inputs). yajl's tree parser is enough:
 * result files are small. Unknown fields are ignored, missing ones left
 * empty, so files of older versions still load. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "rows.h"

static char *slurp(const char *path, char *err, size_t len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, len, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1)
            break;
        char *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        snprintf(err, len, "%s: %s", path, buf ? "read error" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

static void get_str(yajl_val obj, const char *key, char *dst, size_t cap)
{
    const char *path[] = {key, NULL};
    yajl_val v = yajl_tree_get(obj, path, yajl_t_string);
    snprintf(dst, cap, "%s", v ? v->u.string : "");
}

static double get_num(yajl_val obj, const char *key)
{
    const char *path[] = {key, NULL};
    yajl_val v = yajl_tree_get(obj, path, yajl_t_number);
    return v ? YAJL_GET_DOUBLE(v) : 0.0;
}

int rbench_read_json(const char *path, rbench_rows *out, char *err, size_t len)
{
    char *text = slurp(path, err, len);
    if (!text)
        return -1;
    char perr[256] = "";
    yajl_val doc = yajl_tree_parse(text, perr, sizeof perr);
    free(text);
    if (!doc) {
        snprintf(err, len, "%s: not JSON: %s", path, perr);
        return -1;
    }
    const char *tool_path[] = {"tool", NULL};
    const char *rows_path[] = {"rows", NULL};
    yajl_val tool = yajl_tree_get(doc, tool_path, yajl_t_string);
    yajl_val arr = yajl_tree_get(doc, rows_path, yajl_t_array);
    if (!tool || strcmp(tool->u.string, "raybox-bench") != 0 || !arr) {
        snprintf(err, len, "%s: not a raybox-bench result file (no \"tool\" "
                           "or \"rows\")", path);
        yajl_tree_free(doc);
        return -1;
    }
    for (size_t i = 0; i < arr->u.array.len; i++) {
        yajl_val o = arr->u.array.values[i];
        if (!YAJL_IS_OBJECT(o))
            continue;
        rbench_row r;
        memset(&r, 0, sizeof r);
        get_str(o, "version", r.version, sizeof r.version);
        get_str(o, "git", r.git, sizeof r.git);
        get_str(o, "backend", r.backend, sizeof r.backend);
        get_str(o, "device", r.device, sizeof r.device);
        get_str(o, "type", r.type, sizeof r.type);
        get_str(o, "driver", r.driver, sizeof r.driver);
        get_str(o, "category", r.category, sizeof r.category);
        get_str(o, "test", r.test, sizeof r.test);
        get_str(o, "shape", r.shape, sizeof r.shape);
        get_str(o, "path", r.path, sizeof r.path);
        get_str(o, "size", r.size, sizeof r.size);
        get_str(o, "metric", r.metric, sizeof r.metric);
        get_str(o, "unit", r.unit, sizeof r.unit);
        get_str(o, "status", r.status, sizeof r.status);
        get_str(o, "note", r.note, sizeof r.note);
        r.rays = (uint64_t)get_num(o, "rays");
        r.boxes = (uint64_t)get_num(o, "boxes");
        r.value = get_num(o, "value");
        r.min = get_num(o, "min");
        r.max = get_num(o, "max");
        r.repeats = (int)get_num(o, "repeats");
        rbench_add_row(out, &r);
    }
    yajl_tree_free(doc);
    return 0;
}
