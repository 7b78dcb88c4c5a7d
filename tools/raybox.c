/*
 * raybox.c - the batch CLI.
 *
 *   raybox intersect [--backend auto|cpu|opencl] [--device N|NAME]
 *                    [--devices all|LIST]
 *                    [--max-hits N] [FILE]
 *   raybox intersect --rays RAYS --scene SCENE -o OUT [--shard I/N] ...
 *   raybox render SCENE_FILE --camera CAMERA_FILE -o OUT.png
 *                 [--image depth|normal|id] [--backend ...] [--device ...]
 *   raybox devices
 *   raybox visibility SCENE OBSERVERS TARGETS -o OUT [--shard I/N] ...
 *   raybox --help | --version
 *
 * intersect reads one request of POST /v1/intersect (SPEC section 4) from
 * FILE or stdin, streaming it into the shared parser as it is read, and
 * writes the response to stdout with the server's generator, so the bytes
 * are the server's except inside "meta", plus a final newline.
 *
 * Exit status: 0 success; 2 the request is bad (one line on stderr naming
 * the element: "raybox: /rays/17/6: tmin (5.0) > tmax (1.0) (422)");
 *
 * render reads a scene body of POST /v1/scenes (SCENE_FILE) and a render
 * body of POST /v1/scenes/{id}/render (CAMERA_FILE: {"camera", "image",
 * "tmin", "tmax"}), and writes the same PNG rayboxd would answer;
 * 1 anything else (usage, I/O, device, memory).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "json_request.h"
#include "json_response.h"
#include "raybox.h"
#include "raybox_cli.h"
#include "render_image.h"

#define CHUNK (64 * 1024)

static const char usage_main[] =
    "usage: raybox <command> [options]\n"
    "\n"
    "commands:\n"
    "  intersect   answer one JSON intersect request (file or stdin), or\n"
    "              with --rays: a ray file against a scene file, to a file\n"
    "  visibility  line of sight, observers x targets, files to a file\n"
    "  render      draw a scene from a camera into a PNG\n"
    "  devices     list the OpenCL devices and the CPU backend\n"
    "\n"
    "  raybox <command> --help   options of a command\n"
    "  raybox --version          the version\n";

static const char usage_intersect[] =
    "usage: raybox intersect [options] [FILE]\n"
    "       raybox intersect --rays RAYS --scene SCENE -o OUT [options]\n"
    "\n"
    "The second form, a batch job over files, is described after the\n"
    "first:\n"
    "\n"
    "Reads one request body of POST /v1/intersect from FILE (or stdin when\n"
    "FILE is absent or -) and writes the JSON response to stdout. Requests\n"
    "with \"scene\" are refused: the CLI has no scene store.\n"
    "\n"
    "options:\n"
    "  --backend auto|cpu|opencl  backend (default auto: an OpenCL GPU,\n"
    "                             else the CPU backend)\n"
    "  --device N|NAME            OpenCL device: index in `raybox devices`,\n"
    "                             or part of its name\n"
    "  --devices all|LIST         split the rays over several OpenCL devices\n"
    "                             by their speed: all, or indices in `raybox\n"
    "                             devices`, comma-separated\n"
    "  --max-hits N               max_hits of requests that do not say\n"
    "                             (default 64)\n"
    "  --help                     this text\n"
    "\n"
    "exit status: 0 done; 2 bad request (one line on stderr naming the\n"
    "element, e.g. \"raybox: /rays/17/6: ... (422)\"); 1 other failures.\n";

static const char usage_render[] =
    "usage: raybox render SCENE_FILE --camera CAMERA_FILE -o OUT.png\n"
    "                     [options]\n"
    "\n"
    "Draws the scene of SCENE_FILE (a body of POST /v1/scenes: \"boxes\",\n"
    "\"obbs\", ...) as seen by the camera of CAMERA_FILE (a body of\n"
    "POST /v1/scenes/{id}/render: {\"camera\": {\"view\", \"projection\",\n"
    "\"viewport\", \"depth\"}, \"image\", \"tmin\", \"tmax\"}) and writes\n"
    "the 8-bit RGB PNG rayboxd would answer: one pixel a viewport pixel.\n"
    "\n"
    "options:\n"
    "  --camera FILE              the render body (required)\n"
    "  -o, --output FILE          the PNG to write (required)\n"
    "  --image depth|normal|id    the picture (default: the body's \"image\",\n"
    "                             else depth)\n"
    "  --backend auto|cpu|opencl  backend (default auto)\n"
    "  --device N|NAME            OpenCL device\n"
    "  --devices all|LIST         split the pixels' rays over several OpenCL\n"
    "                             devices (as for intersect)\n"
    "  --help                     this text\n"
    "\n"
    "exit status: 0 done; 2 bad scene or camera (one line on stderr naming\n"
    "the element, e.g. \"raybox: CAMERA_FILE: /camera/viewport/2: ...\n"
    "(422)\"); 1 other failures.\n";

static const char usage_devices[] =
    "usage: raybox devices\n"
    "\n"
    "Lists every OpenCL device and the native CPU backend; '*' marks the\n"
    "one --backend auto picks.\n";

/* One line for a request error: the file (when not NULL), pointer,
 * detail, class. */
static void print_file_error(const char *file, const rbq_error *e)
{
    fprintf(stderr, "raybox: %s%s", file ? file : "", file ? ": " : "");
    if (e->has_pointer && e->pointer[0])
        fprintf(stderr, "%s: %s (%d)\n", e->pointer, e->detail, e->status);
    else
        fprintf(stderr, "%s (%d)\n", e->detail, e->status);
}

static void print_request_error(const rbq_error *e)
{
    print_file_error(NULL, e);
}

static int exit_for(const rbq_error *e)
{
    return e->status >= 400 && e->status < 500 ? 2 : 1;
}

/* ------------------------------------------------------------------------
 * intersect
 */
typedef struct cli_opts {
    rb_context_options ctx;
    uint32_t max_hits;
    const char *file;
} cli_opts;

static int parse_u32_arg(const char *s, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || errno || v < 1 || v > UINT32_MAX || *s == '-')
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* 0 ok, 1 usage error (printed), -1 --help printed. */
static int parse_intersect_args(int argc, char **argv, cli_opts *o)
{
    rb_context_options_init(&o->ctx);
    o->max_hits = 64;
    o->file = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_intersect, stdout);
            fputs("\n", stdout);
            char help[] = "--help", *args[] = {help};
            batch_opts bo;
            batch_parse(BATCH_INTERSECT, 1, args, 1, &bo);
            return -1;
        } else if (strcmp(a, "--backend") == 0 && val) {
            if (rb_backend_kind_parse(val, &o->ctx.backend) != RB_OK) {
                fprintf(stderr, "raybox: unknown backend '%s' (auto, cpu or "
                                "opencl)\n", val);
                return 1;
            }
            i++;
        } else if (strcmp(a, "--devices") == 0 && val) {
            o->ctx.devices = val;
            i++;
        } else if (strcmp(a, "--device") == 0 && val) {
            if (val[0] >= '0' && val[0] <= '9' &&
                strspn(val, "0123456789") == strlen(val))
                o->ctx.device_index = atoi(val);
            else
                o->ctx.device_name = val;
            i++;
        } else if (strcmp(a, "--max-hits") == 0 && val) {
            if (parse_u32_arg(val, &o->max_hits)) {
                fprintf(stderr, "raybox: --max-hits takes an integer >= 1, "
                                "not '%s'\n", val);
                return 1;
            }
            i++;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "raybox: unknown or incomplete option '%s'\n%s",
                    a, usage_intersect);
            return 1;
        } else if (!o->file) {
            o->file = a;
        } else {
            fprintf(stderr, "raybox: one request file at most\n");
            return 1;
        }
    }
    return 0;
}

/* Streams the request into p. 0 parsed, 2 bad request (printed, named
 * by its file when `named`), 1 I/O. */
static int read_file_request(const char *file, rbj_parser *p, int named)
{
    FILE *in = stdin;
    int from_stdin = !file || strcmp(file, "-") == 0;
    if (!from_stdin && !(in = fopen(file, "rb"))) {
        fprintf(stderr, "raybox: %s: %s\n", file, strerror(errno));
        return 1;
    }
    static char buf[CHUNK];
    int rc = 0;
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        if (rbj_parser_feed(p, buf, n))
            break; /* the first problem decides; the rest is not needed */
    if (ferror(in)) {
        fprintf(stderr, "raybox: reading %s: %s\n",
                from_stdin ? "stdin" : file, strerror(errno));
        rc = 1;
    } else if (rbj_parser_finish(p)) {
        print_file_error(named ? file : NULL, rbj_parser_error(p));
        rc = exit_for(rbj_parser_error(p));
    }
    if (!from_stdin)
        fclose(in);
    return rc;
}

static int read_request(const char *file, rbj_parser *p)
{
    return read_file_request(file, p, 0);
}

static int write_response(const rbq_request *r, const rb_results *res)
{
    rbj_response resp = {.mode = r->mode, .n_rays = r->n_rays,
                         .max_hits = r->max_hits, .results = res};
    rbj_meta_from_run(&resp.meta, &res->info);
    rbj_writer w;
    rbj_writer_init(&w, &resp);
    static char buf[CHUNK];
    size_t n;
    while ((n = rbj_writer_fill(&w, buf, sizeof buf)) > 0)
        if (fwrite(buf, 1, n, stdout) != n)
            break;
    if (!rbj_writer_done(&w) || fputc('\n', stdout) == EOF ||
        fflush(stdout) == EOF) {
        fprintf(stderr, "raybox: writing the response: %s\n",
                strerror(errno));
        return 1;
    }
    return 0;
}

static int cmd_intersect(int argc, char **argv)
{
    cli_opts o;
    int rc = parse_intersect_args(argc, argv, &o);
    if (rc)
        return rc < 0 ? 0 : 1;

    rbj_options popt;
    rbj_options_init(&popt, RBQ_INTERSECT);
    popt.limits.default_max_hits = o.max_hits;
    rbj_parser *p = NULL;
    rb_context *ctx = NULL;
    rb_results res = {0};
    if (rbj_parser_create(&popt, &p) != RB_OK) {
        fprintf(stderr, "raybox: out of memory\n");
        return 1;
    }
    rc = read_request(o.file, p);
    if (rc)
        goto done;
    const rbq_request *r = rbj_parser_request(p);
    if (r->scene) {
        fprintf(stderr, "raybox: /scene: the CLI has no scene store; send "
                        "the boxes in \"boxes\" (scenes are served by "
                        "rayboxd) (422)\n");
        rc = 2;
        goto done;
    }

    char why[512] = "";
    int st = rb_context_create(&o.ctx, &ctx, why, sizeof why);
    if (st != RB_OK) {
        fprintf(stderr, "raybox: no %s backend: %s (%s)\n",
                rb_backend_kind_name(o.ctx.backend), why,
                rb_status_name(st));
        rc = 1;
        goto done;
    }
    if (rbq_results_alloc(r, &res)) {
        fprintf(stderr, "raybox: out of memory for %zu results\n",
                r->n_rays);
        rc = 1;
        goto done;
    }
    rb_query q = {.mode = r->mode, .dims = r->dims, .rays = r->rays,
                  .n_rays = r->n_rays, .boxes = r->boxes,
                  .n_boxes = r->n_boxes, .max_hits = r->max_hits,
                  .shapes = r->shapes, .outputs = r->outputs};
    st = rb_intersect(ctx, &q, &res);
    if (st != RB_OK) {
        rbq_error e;
        rbq_error_from_library(r, RBQ_FROM_INTERSECT, rb_context_error(ctx),
                               &e);
        print_request_error(&e);
        rc = exit_for(&e);
        goto done;
    }
    rc = write_response(r, &res);
done:
    rbq_results_free(&res);
    rb_context_destroy(ctx);
    rbj_parser_destroy(p);
    return rc;
}

/* ------------------------------------------------------------------------
 * render
 */
static int parse_backend(const char *a, const char *val, rb_context_options *o)
{
    if (strcmp(a, "--backend") == 0) {
        if (rb_backend_kind_parse(val, &o->backend) != RB_OK) {
            fprintf(stderr, "raybox: unknown backend '%s' (auto, cpu or "
                            "opencl)\n", val);
            return 1;
        }
    } else if (val[0] >= '0' && val[0] <= '9' &&
               strspn(val, "0123456789") == strlen(val)) {
        o->device_index = atoi(val);
    } else {
        o->device_name = val;
    }
    return 0;
}

/* Parses one JSON body of a kind from a file; 0, 2 bad (printed with the
 * file's name), 1 I/O. */
static int read_body(const char *file, const rbj_options *opt,
                     rbj_parser **p)
{
    if (rbj_parser_create(opt, p) != RB_OK) {
        fprintf(stderr, "raybox: out of memory\n");
        return 1;
    }
    if (strcmp(file, "-") == 0) {
        fprintf(stderr, "raybox: render reads files, not stdin\n");
        return 1;
    }
    return read_file_request(file, *p, 1);
}

static int cmd_render(int argc, char **argv)
{
    rb_context_options copt;
    rb_context_options_init(&copt);
    const char *scene_file = NULL, *camera_file = NULL, *out_file = NULL;
    int image = -1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage_render, stdout);
            return 0;
        } else if ((strcmp(a, "--backend") == 0 ||
                    strcmp(a, "--device") == 0) && val) {
            if (parse_backend(a, val, &copt))
                return 1;
            i++;
        } else if (strcmp(a, "--devices") == 0 && val) {
            copt.devices = val;
            i++;
        } else if (strcmp(a, "--camera") == 0 && val) {
            camera_file = val;
            i++;
        } else if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) &&
                   val) {
            out_file = val;
            i++;
        } else if (strcmp(a, "--image") == 0 && val) {
            static const char *const names[] = {"depth", "normal", "id"};
            for (int k = 0; k < 3; k++)
                if (strcmp(val, names[k]) == 0)
                    image = k;
            if (image < 0) {
                fprintf(stderr, "raybox: --image takes depth, normal or id, "
                                "not '%s'\n", val);
                return 1;
            }
            i++;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "raybox: unknown or incomplete option '%s'\n%s",
                    a, usage_render);
            return 1;
        } else if (!scene_file) {
            scene_file = a;
        } else {
            fprintf(stderr, "raybox: one scene file at most\n");
            return 1;
        }
    }
    if (!scene_file || !camera_file || !out_file) {
        fprintf(stderr, "raybox: render needs SCENE_FILE, --camera FILE and "
                        "-o FILE\n%s", usage_render);
        return 1;
    }

    rbj_parser *sp = NULL, *cp = NULL;
    rb_context *ctx = NULL;
    rb_scene *scene = NULL;
    rb_results res = {0};
    rb_ray *rays = NULL;
    uint8_t *rgb = NULL;
    void *png = NULL;
    size_t png_len = 0;
    FILE *out = NULL;
    rbj_options so;
    rbj_options_init(&so, RBQ_SCENE_CREATE);
    int rc = read_body(scene_file, &so, &sp);
    if (rc)
        goto done;
    const rbq_request *sr = rbj_parser_request(sp);
    rbj_options ro;
    rbj_options_init(&ro, RBQ_RENDER);
    ro.scene_in_path = 1;
    ro.scene_dims = sr->dims;
    /* A picture is as large as the machine allows, not the server's
     * batch limit. */
    ro.limits.max_rays = UINT32_MAX;
    ro.limits.max_results = UINT64_MAX;
    if ((rc = read_body(camera_file, &ro, &cp)))
        goto done;
    rbq_request r = *rbj_parser_request(cp);
    if (image >= 0)
        r.image = (rbq_image)image;

    char why[512] = "";
    int st = rb_context_create(&copt, &ctx, why, sizeof why);
    if (st != RB_OK) {
        fprintf(stderr, "raybox: no %s backend: %s (%s)\n",
                rb_backend_kind_name(copt.backend), why, rb_status_name(st));
        rc = 1;
        goto done;
    }
    if (rb_scene_create_shapes(ctx, sr->dims, sr->boxes, sr->n_boxes,
                               &sr->shapes, &scene) != RB_OK) {
        rbq_error e;
        rbq_error_from_library(sr, RBQ_FROM_CREATE, rb_context_error(ctx),
                               &e);
        print_file_error(scene_file, &e);
        rc = exit_for(&e);
        goto done;
    }
    size_t n = (size_t)r.n_camera_rays;
    rays = malloc((n ? n : 1) * sizeof *rays);
    rgb = malloc(3 * (n ? n : 1));
    r.rays = rays;
    r.n_rays = n;
    if (r.image == RBQ_IMAGE_NORMAL)
        r.outputs |= RB_OUTPUT_NORMAL;
    if (!rays || !rgb || rbq_results_alloc(&r, &res)) {
        fprintf(stderr, "raybox: out of memory for %zu pixels\n", n);
        rc = 1;
        goto done;
    }
    rb_error ce;
    if (rb_camera_rays(r.camera, 0, n, rays, &ce) != RB_OK) {
        rbq_error e;
        rbq_error_from_library(&r, RBQ_FROM_CAMERA, &ce, &e);
        print_file_error(camera_file, &e);
        rc = exit_for(&e);
        goto done;
    }
    rb_query q = {.mode = RB_MODE_NEAREST, .dims = 3, .rays = rays,
                  .n_rays = n, .scene = scene, .max_hits = 1,
                  .outputs = r.outputs};
    if ((st = rb_intersect(ctx, &q, &res)) != RB_OK) {
        fprintf(stderr, "raybox: the query failed: %s\n",
                rb_context_error(ctx)->message);
        rc = 1;
        goto done;
    }
    rbr_image_rgb(r.image, &res, n, rgb);
    if (rbr_png_encode(rgb, (uint32_t)r.camera->viewport[2],
                       (uint32_t)r.camera->viewport[3], &png, &png_len, why,
                       sizeof why)) {
        fprintf(stderr, "raybox: %s\n", why);
        rc = 1;
        goto done;
    }
    if (!(out = fopen(out_file, "wb")) ||
        fwrite(png, 1, png_len, out) != png_len) {
        fprintf(stderr, "raybox: %s: %s\n", out_file, strerror(errno));
        rc = 1;
        goto done;
    }
done:
    if (out && fclose(out) != 0 && !rc) {
        fprintf(stderr, "raybox: %s: %s\n", out_file, strerror(errno));
        rc = 1;
    }
    free(png);
    free(rgb);
    free(rays);
    rbq_results_free(&res);
    rb_scene_destroy(scene);
    rb_context_destroy(ctx);
    rbj_parser_destroy(cp);
    rbj_parser_destroy(sp);
    return rc;
}

/* ------------------------------------------------------------------------
 * devices
 */
static int cmd_devices(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage_devices, stdout);
            return 0;
        }
        fprintf(stderr, "raybox: devices takes no argument ('%s')\n",
                argv[i]);
        return 1;
    }
    size_t count = 0;
    char why[256] = "";
    int st = rb_devices_list(NULL, 0, &count, why, sizeof why);
    rb_device_desc *devs = NULL;
    if (st == RB_OK && count) {
        devs = calloc(count, sizeof *devs);
        if (!devs) {
            fprintf(stderr, "raybox: out of memory\n");
            return 1;
        }
        st = rb_devices_list(devs, count, &count, why, sizeof why);
    }
    if (st != RB_OK) {
        fprintf(stderr, "raybox: listing OpenCL devices: %s (%s)\n", why,
                rb_status_name(st));
        free(devs);
        return 1;
    }
    /* auto takes the first GPU or accelerator (context.c), else the CPU
     * backend; it falls back to the CPU if that device fails to build. */
    size_t pick = count;
    for (size_t i = 0; i < count && pick == count; i++)
        if (strcmp(devs[i].type, "gpu") == 0 ||
            strcmp(devs[i].type, "accelerator") == 0)
            pick = i;

    printf("OpenCL devices:\n");
    if (!count)
        printf("  none (%s)\n", why[0] ? why : "no OpenCL platform");
    for (size_t i = 0; i < count; i++) {
        const rb_device_desc *d = &devs[i];
        printf("%c %d  %-11s %s\n", i == pick ? '*' : ' ', d->index,
               d->type, d->name);
        printf("       %s; %s; driver %s; %u compute units; %llu MiB; "
               "exact division %s; denormals %s\n",
               d->platform, d->version, d->driver, d->compute_units,
               (unsigned long long)(d->global_mem >> 20),
               d->exact_division ? "yes" : "no", d->denormals ? "yes" : "no");
    }
    free(devs);

    rb_context_options opt;
    rb_context_options_init(&opt);
    opt.backend = RB_BACKEND_CPU;
    rb_context *ctx = NULL;
    rb_backend_info info;
    printf("CPU backend:\n");
    if (rb_context_create(&opt, &ctx, why, sizeof why) == RB_OK &&
        rb_context_info(ctx, &info) == RB_OK)
        printf("%c cpu  %s\n       %u threads; simd %s\n",
               pick == count ? '*' : ' ', info.device, info.threads,
               info.simd[0] ? info.simd : "none");
    else
        printf("  unavailable (%s)\n", why);
    rb_context_destroy(ctx);
    printf("(* = what --backend auto picks)\n");
    return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_main, stderr);
        return 1;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
        strcmp(cmd, "help") == 0) {
        fputs(usage_main, stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("raybox %s\n", RB_VERSION_STRING);
        return 0;
    }
    if (strcmp(cmd, "intersect") == 0) {
        for (int i = 2; i < argc; i++)
            if (strcmp(argv[i], "--rays") == 0 ||
                strcmp(argv[i], "--scene") == 0)
                return cmd_intersect_files(argc - 2, argv + 2);
        return cmd_intersect(argc - 2, argv + 2);
    }
    if (strcmp(cmd, "devices") == 0)
        return cmd_devices(argc - 2, argv + 2);
    if (strcmp(cmd, "visibility") == 0)
        return cmd_visibility(argc - 2, argv + 2);
    if (strcmp(cmd, "render") == 0)
        return cmd_render(argc - 2, argv + 2);
    fprintf(stderr, "raybox: unknown command '%s'\n%s", cmd, usage_main);
    return 1;
}
