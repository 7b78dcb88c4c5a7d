/* testutil.c - see testutil.h. */
#include "testutil.h"

#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

const char *rbt_backend_name(int which)
{
    return which == RBT_CPU ? "cpu" : "opencl";
}

rb_context *rbt_context_opts(int which, const rb_context_options *opt_in)
{
    rb_context_options opt;
    if (opt_in)
        opt = *opt_in;
    else
        rb_context_options_init(&opt);
    opt.backend = which == RBT_CPU ? RB_BACKEND_CPU : RB_BACKEND_OPENCL;
    rb_context *ctx = NULL;
    char why[512] = "";
    int rc = rb_context_create(&opt, &ctx, why, sizeof why);
    if (rc != RB_OK && which == RBT_OPENCL) {
        const char *allow = getenv("RAYBOX_TEST_NO_OPENCL");
        if (allow && strcmp(allow, "1") == 0) {
            fprintf(stderr, "NOTICE: OpenCL unavailable (%s); "
                            "RAYBOX_TEST_NO_OPENCL=1 allows it\n", why);
            return NULL;
        }
    }
    ck_assert_msg(rc == RB_OK, "%s context: %s (%s)", rbt_backend_name(which),
                  rb_status_name(rc), why);
    return ctx;
}

rb_context *rbt_context(int which)
{
    return rbt_context_opts(which, NULL);
}

rb_context *rbt_context_limited(int which, uint64_t max_buffer_bytes,
                                uint64_t memory_budget, int cpu_fallback)
{
    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.max_buffer_bytes = max_buffer_bytes;
    opt.memory_budget = memory_budget;
    opt.cpu_fallback = cpu_fallback;
    rb_context *ctx = rbt_context_opts(which, &opt);
    ck_assert_ptr_nonnull(ctx);
    return ctx;
}

uint64_t rbt_next(rbt_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

float rbt_uniform(rbt_rng *r, float lo, float hi)
{
    double u = (double)(rbt_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(lo + (hi - lo) * u);
}

uint32_t rbt_below(rbt_rng *r, uint32_t n)
{
    return (uint32_t)((rbt_next(r) >> 32) * (uint64_t)n >> 32);
}

int rbt_same_hit(const rb_hit *a, const rb_hit *b)
{
    return a->hit == b->hit && a->box == b->box && a->face == b->face &&
           a->exit_face == b->exit_face && a->reserved == b->reserved &&
           rbt_same_float(a->t_enter, b->t_enter) &&
           rbt_same_float(a->t_exit, b->t_exit);
}

const char *rbt_hit_str(const rb_hit *h, char *buf, size_t len)
{
    const char *f = rb_face_name(h->face), *x = rb_face_name(h->exit_face);
    snprintf(buf, len, "hit=%d box=%d t=[%.9g, %.9g] faces %s/%s", h->hit,
             h->box, (double)h->t_enter, (double)h->t_exit, f ? f : "none",
             x ? x : "none");
    return buf;
}

static float num(yajl_val v)
{
    if (YAJL_IS_STRING(v)) {
        const char *s = YAJL_GET_STRING(v);
        if (strcmp(s, "inf") == 0)
            return INFINITY;
        if (strcmp(s, "-inf") == 0)
            return -INFINITY;
        if (strcmp(s, "nan") == 0)
            return NAN;
        ck_abort_msg("bad number string %s", s);
    }
    ck_assert_msg(YAJL_IS_NUMBER(v), "vector field is not a number");
    /* strtof from the original text: one rounding, as the service does. */
    return strtof(v->u.number.r, NULL);
}

static void vec3(yajl_val obj, const char *key, float out[3])
{
    const char *path[] = {key, NULL};
    yajl_val a = yajl_tree_get(obj, path, yajl_t_array);
    ck_assert_msg(a && a->u.array.len == 3, "vector %s missing", key);
    for (int i = 0; i < 3; i++)
        out[i] = num(a->u.array.values[i]);
}

static int face_of(yajl_val obj, const char *key)
{
    const char *path[] = {key, NULL};
    yajl_val v = yajl_tree_get(obj, path, yajl_t_any);
    if (!v || YAJL_IS_NULL(v))
        return RB_FACE_NONE;
    const char *name = YAJL_GET_STRING(v);
    ck_assert_msg(name, "face %s is not a string", key);
    for (int f = RB_FACE_NEG_X; f <= RB_FACE_POS_Z; f++)
        if (strcmp(name, rb_face_name(f)) == 0)
            return f;
    ck_abort_msg("bad face");
    return -1;
}

size_t rbt_load_vectors(rbt_vector **out)
{
    const char *file = getenv("RAYBOX_VECTORS");
    ck_assert_msg(file, "RAYBOX_VECTORS is not set");
    FILE *f = fopen(file, "rb");
    ck_assert_msg(f, "cannot open %s", file);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    char err[256];
    yajl_val root = yajl_tree_parse(text, err, sizeof err);
    ck_assert_msg(root, "%s: %s", file, err);
    const char *vpath[] = {"vectors", NULL};
    yajl_val vs = yajl_tree_get(root, vpath, yajl_t_array);
    ck_assert(vs);
    size_t count = vs->u.array.len;
    rbt_vector *v = calloc(count, sizeof *v);
    for (size_t i = 0; i < count; i++) {
        yajl_val o = vs->u.array.values[i];
        const char *p_id[] = {"id", NULL}, *p_case[] = {"case", NULL},
                   *p_exp[] = {"expected", NULL}, *p_rng[] = {"t_range", NULL};
        snprintf(v[i].id, sizeof v[i].id, "%s",
                 YAJL_GET_STRING(yajl_tree_get(o, p_id, yajl_t_string)));
        snprintf(v[i].what, sizeof v[i].what, "%s",
                 YAJL_GET_STRING(yajl_tree_get(o, p_case, yajl_t_string)));
        vec3(o, "origin", v[i].ray.origin);
        vec3(o, "dir", v[i].ray.dir);
        vec3(o, "box_min", v[i].box.min);
        vec3(o, "box_max", v[i].box.max);
        yajl_val rng = yajl_tree_get(o, p_rng, yajl_t_array);
        v[i].ray.tmin = num(rng->u.array.values[0]);
        v[i].ray.tmax = num(rng->u.array.values[1]);
        const char *e = YAJL_GET_STRING(yajl_tree_get(o, p_exp,
                                                      yajl_t_string));
        v[i].expect = strcmp(e, "hit") == 0 ? 1 : strcmp(e, "miss") == 0 ? 0
                                                                         : -1;
        if (v[i].expect == 1) {
            const char *p_te[] = {"t_enter", NULL}, *p_tx[] = {"t_exit", NULL};
            v[i].t_enter = num(yajl_tree_get(o, p_te, yajl_t_any));
            v[i].t_exit = num(yajl_tree_get(o, p_tx, yajl_t_any));
            v[i].face = face_of(o, "enter_face");
            v[i].exit_face = face_of(o, "exit_face");
        }
    }
    yajl_tree_free(root);
    *out = v;
    return count;
}

void *rbt_aligned_alloc(size_t size, size_t align)
{
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align,
                       size ? size : 1))
        return NULL;
    return p;
}

static long runner_pid;

long rbt_runner_pid(void)
{
    return runner_pid ? runner_pid : (long)getpid();
}

int rbt_run_suite(Suite *s)
{
    runner_pid = (long)getpid();
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (!failed) {
        char pattern[96];
        snprintf(pattern, sizeof pattern, RBT_SERVER_LOGS "*.log",
                 runner_pid);
        glob_t g;
        if (glob(pattern, 0, NULL, &g) == 0) {
            for (size_t i = 0; i < g.gl_pathc; i++)
                unlink(g.gl_pathv[i]);
            globfree(&g);
        }
    }
    return failed;
}
