/*
 * _native.c - raybox._native, the CPython extension over libraybox.
 *
 * Thin on purpose: it takes and fills buffers (the buffer protocol, so any
 * C-contiguous numpy array), checks their sizes against the record sizes
 * of raybox.h, and calls the library with the GIL released. The numpy side
 * (shapes, dtypes, conversions, result columns) is raybox/_scene.py; it
 * allocates every output array, so this file never depends on numpy's C
 * API and builds without numpy installed.
 *
 * Threads: a Context wraps one rb_context, which one thread may use at a
 * time (raybox.h). Every call that uses it, and every change of a Scene
 * made through it, takes the Context's lock after releasing the GIL, so
 * Python threads that share a Context queue up instead of racing, and
 * threads with their own Contexts run in parallel.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "raybox.h"

static PyObject *raybox_error;       /* raybox.Error */
static PyObject *raybox_input_error; /* raybox.InputError(Error, ValueError) */

typedef struct {
    PyObject_HEAD
    rb_context *ctx;
    PyThread_type_lock lock;
} ContextObject;

typedef struct {
    PyObject_HEAD
    rb_scene *scene;
    ContextObject *owner; /* the Context it was made with; strong ref */
    unsigned dims;
} SceneObject;

static PyTypeObject ContextType;
static PyTypeObject SceneType;

static const char *element_name(rb_element_kind e)
{
    switch (e) {
    case RB_ELEMENT_RAY: return "ray";
    case RB_ELEMENT_BOX: return "box";
    case RB_ELEMENT_OBB: return "obb";
    case RB_ELEMENT_XBOX: return "xbox";
    case RB_ELEMENT_SPHERE: return "sphere";
    case RB_ELEMENT_PLANE: return "plane";
    default: return NULL;
    }
}

/* Raises the exception of a failed library call; err is a copy of the
 * context's error slot taken under the lock. Input faults are InputError
 * (a ValueError) with the element, index and field as attributes. */
static PyObject *raise_status(int rc, const rb_error *err)
{
    PyObject *type = raybox_error;
    if (rc == RB_EINPUT || rc == RB_EINVAL)
        type = raybox_input_error;
    else if (rc == RB_ENOMEM)
        type = PyExc_MemoryError;
    const char *msg = err && err->status == rc && err->message[0]
                          ? err->message : rb_status_str(rc);
    PyObject *text = PyUnicode_FromFormat("%s (%s)", msg, rb_status_name(rc));
    if (!text)
        return NULL;
    PyObject *exc = PyObject_CallOneArg(type, text);
    Py_DECREF(text);
    if (!exc)
        return NULL;
    if (type != PyExc_MemoryError) {
        const char *el = err && err->status == rc ? element_name(err->element)
                                                  : NULL;
        PyObject *v;
        v = PyUnicode_FromString(rb_status_name(rc));
        if (v) { PyObject_SetAttrString(exc, "status", v); Py_DECREF(v); }
        if (el) {
            v = PyUnicode_FromString(el);
            if (v) { PyObject_SetAttrString(exc, "element", v); Py_DECREF(v); }
            v = PyLong_FromUnsignedLongLong(err->index);
            if (v) { PyObject_SetAttrString(exc, "index", v); Py_DECREF(v); }
            v = PyLong_FromLong(err->field);
            if (v) { PyObject_SetAttrString(exc, "field", v); Py_DECREF(v); }
        } else {
            PyObject_SetAttrString(exc, "element", Py_None);
            PyObject_SetAttrString(exc, "index", Py_None);
            PyObject_SetAttrString(exc, "field", Py_None);
        }
    }
    PyErr_SetObject(type, exc);
    Py_DECREF(exc);
    return NULL;
}

/* ---- buffers ------------------------------------------------------------ */

/* A borrowed record array: buf.len must be a multiple of rec. obj None
 * gives an empty one. */
typedef struct {
    Py_buffer view;
    int held;
    size_t n;
} records;

static int records_get(PyObject *obj, size_t rec, int writable,
                       const char *what, records *out)
{
    memset(out, 0, sizeof *out);
    if (obj == NULL || obj == Py_None)
        return 0;
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &out->view, flags) < 0)
        return -1;
    out->held = 1;
    if ((size_t)out->view.len % rec != 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s: %zd bytes is not a whole number of %zu-byte records",
                     what, out->view.len, rec);
        return -1;
    }
    out->n = (size_t)out->view.len / rec;
    return 0;
}

static void records_release(records *r)
{
    if (r->held)
        PyBuffer_Release(&r->view);
    r->held = 0;
}

static int need(const records *r, size_t n, const char *what)
{
    if (!r->held || r->n < n) {
        PyErr_Format(PyExc_ValueError, "%s: room for %zu records needed", what,
                     n);
        return -1;
    }
    return 0;
}

/* ---- Context ------------------------------------------------------------ */

static int Context_init(ContextObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"backend", "threads", "device", NULL};
    const char *backend = "auto";
    unsigned int threads = 0;
    PyObject *device = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|sIO", kwlist, &backend,
                                     &threads, &device))
        return -1;
    if (self->ctx) {
        PyErr_SetString(PyExc_RuntimeError, "Context is already initialised");
        return -1;
    }
    rb_context_options opt;
    rb_context_options_init(&opt);
    if (rb_backend_kind_parse(backend, &opt.backend) != RB_OK) {
        PyErr_Format(PyExc_ValueError,
                     "backend '%s': expected 'auto', 'cpu' or 'opencl'",
                     backend);
        return -1;
    }
    opt.threads = threads;
    if (device != Py_None) {
        if (PyLong_Check(device)) {
            long d = PyLong_AsLong(device);
            if (d == -1 && PyErr_Occurred())
                return -1;
            if (d < -1 || d > INT32_MAX) {
                PyErr_Format(PyExc_ValueError, "device %ld: not an index", d);
                return -1;
            }
            opt.device_index = (int)d;
        } else if (PyUnicode_Check(device)) {
            opt.device_name = PyUnicode_AsUTF8(device);
            if (!opt.device_name)
                return -1;
        } else {
            PyErr_SetString(PyExc_TypeError,
                            "device: an index (int) or part of a name (str)");
            return -1;
        }
    }
    self->lock = PyThread_allocate_lock();
    if (!self->lock) {
        PyErr_NoMemory();
        return -1;
    }
    char why[512] = "";
    rb_context *ctx = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = rb_context_create(&opt, &ctx, why, sizeof why);
    Py_END_ALLOW_THREADS
    if (rc != RB_OK) {
        PyErr_Format(rc == RB_ENOMEM ? PyExc_MemoryError : raybox_error,
                     "backend '%s': %s (%s)", backend,
                     why[0] ? why : rb_status_str(rc), rb_status_name(rc));
        return -1;
    }
    self->ctx = ctx;
    return 0;
}

static void Context_dealloc(ContextObject *self)
{
    rb_context_destroy(self->ctx);
    if (self->lock)
        PyThread_free_lock(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int context_ready(ContextObject *self)
{
    if (!self->ctx) {
        PyErr_SetString(PyExc_RuntimeError, "Context is not initialised");
        return -1;
    }
    return 0;
}

static PyObject *Context_info(ContextObject *self, PyObject *unused)
{
    if (context_ready(self) < 0)
        return NULL;
    rb_backend_info bi;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(self->lock, WAIT_LOCK);
    rc = rb_context_info(self->ctx, &bi);
    PyThread_release_lock(self->lock);
    Py_END_ALLOW_THREADS
    if (rc != RB_OK)
        return raise_status(rc, NULL);
    return Py_BuildValue(
        "{s:s,s:s,s:s,s:s,s:s,s:O,s:O,s:O,s:I,s:I,s:K,s:K,s:s}",
        "backend", bi.backend, "device", bi.device, "platform", bi.platform,
        "driver", bi.driver, "simd", bi.simd,
        "is_gpu", bi.is_gpu ? Py_True : Py_False,
        "exact_division", bi.exact_division ? Py_True : Py_False,
        "denormals", bi.denormals ? Py_True : Py_False,
        "compute_units", bi.compute_units, "threads", bi.threads,
        "global_mem", (unsigned long long)bi.global_mem,
        "max_buffer_bytes", (unsigned long long)bi.max_buffer_bytes,
        "skipped", bi.skipped);
}

/* The outputs of one query (borrowed writable buffers). */
typedef struct {
    records hits, any, counts, list, kinds, normals;
} outputs;

static void outputs_release(outputs *o)
{
    records_release(&o->hits);
    records_release(&o->any);
    records_release(&o->counts);
    records_release(&o->list);
    records_release(&o->kinds);
    records_release(&o->normals);
}

static int outputs_get(PyObject *hits, PyObject *any, PyObject *counts,
                       PyObject *list, PyObject *kinds, PyObject *normals,
                       outputs *o)
{
    memset(o, 0, sizeof *o);
    if (records_get(hits, sizeof(rb_hit), 1, "hits", &o->hits) < 0 ||
        records_get(any, 1, 1, "any", &o->any) < 0 ||
        records_get(counts, 4, 1, "counts", &o->counts) < 0 ||
        records_get(list, sizeof(rb_list_hit), 1, "list", &o->list) < 0 ||
        records_get(kinds, 1, 1, "kinds", &o->kinds) < 0 ||
        records_get(normals, 12, 1, "normals", &o->normals) < 0)
        return -1;
    return 0;
}

/* Checks the outputs the mode needs and points results at them. */
static int outputs_bind(outputs *o, rb_mode mode, size_t n, uint32_t max_hits,
                        int want_normals, rb_results *res)
{
    memset(res, 0, sizeof *res);
    res->capacity = n;
    switch (mode) {
    case RB_MODE_PAIRS:
    case RB_MODE_NEAREST:
        if (need(&o->hits, n, "hits") < 0)
            return -1;
        res->hits = (rb_hit *)o->hits.view.buf;
        if (o->kinds.held) {
            if (need(&o->kinds, n, "kinds") < 0)
                return -1;
            res->kinds = (uint8_t *)o->kinds.view.buf;
        }
        if (want_normals) {
            if (need(&o->normals, n, "normals") < 0)
                return -1;
            res->normals = (float *)o->normals.view.buf;
        }
        break;
    case RB_MODE_ANY:
        if (need(&o->any, n, "any") < 0)
            return -1;
        res->any = (uint8_t *)o->any.view.buf;
        break;
    case RB_MODE_COUNT:
        if (need(&o->counts, n, "counts") < 0)
            return -1;
        res->counts = (uint32_t *)o->counts.view.buf;
        break;
    case RB_MODE_ALL:
        if (need(&o->counts, n, "counts") < 0 ||
            need(&o->list, n * (size_t)max_hits, "list") < 0)
            return -1;
        res->counts = (uint32_t *)o->counts.view.buf;
        res->list = (rb_list_hit *)o->list.view.buf;
        break;
    }
    /* The library wants non-NULL arrays even for zero rays. */
    static rb_hit dummy_hit;
    static uint8_t dummy_u8;
    static uint32_t dummy_u32;
    static rb_list_hit dummy_list;
    if (n == 0) {
        if (!res->hits) res->hits = &dummy_hit;
        if (!res->any) res->any = &dummy_u8;
        if (!res->counts) res->counts = &dummy_u32;
        if (!res->list) res->list = &dummy_list;
    }
    return 0;
}

static PyObject *run_info(const rb_run_info *ri)
{
    return Py_BuildValue("{s:s,s:s,s:O,s:s,s:d,s:d,s:K}", "backend",
                         ri->backend, "device", ri->device, "fell_back",
                         ri->fell_back ? Py_True : Py_False,
                         "fallback_reason", ri->fallback_reason,
                         "elapsed_ms", ri->elapsed_ms, "kernel_ms",
                         ri->kernel_ms, "slab_tests",
                         (unsigned long long)ri->slab_tests);
}

static int mode_from(int mode, rb_mode *out)
{
    if (mode < RB_MODE_PAIRS || mode > RB_MODE_ALL) {
        PyErr_Format(PyExc_ValueError, "mode %d: not 0..4", mode);
        return -1;
    }
    *out = (rb_mode)mode;
    return 0;
}

static int dims_ok(unsigned dims)
{
    if (dims != 2 && dims != 3) {
        PyErr_Format(PyExc_ValueError, "dims %u: expected 2 or 3", dims);
        return -1;
    }
    return 0;
}

static size_t ray_size(unsigned dims)
{
    return dims == 3 ? sizeof(rb_ray) : sizeof(rb_ray2);
}

static size_t box_size(unsigned dims)
{
    return dims == 3 ? sizeof(rb_box) : sizeof(rb_box2);
}

/* Runs q on ctx with the GIL released and the context locked. */
static PyObject *run_query(ContextObject *c, rb_query *q, rb_results *res)
{
    rb_error err;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(c->lock, WAIT_LOCK);
    rc = rb_intersect(c->ctx, q, res);
    if (rc != RB_OK)
        err = *rb_context_error(c->ctx);
    PyThread_release_lock(c->lock);
    Py_END_ALLOW_THREADS
    if (rc != RB_OK)
        return raise_status(rc, &err);
    return run_info(&res->info);
}

/* The element lists of a call (boxes and shapes), borrowed. */
typedef struct {
    records boxes, obbs, xboxes, spheres, planes;
} elements;

static void elements_release(elements *e)
{
    records_release(&e->boxes);
    records_release(&e->obbs);
    records_release(&e->xboxes);
    records_release(&e->spheres);
    records_release(&e->planes);
}

static int elements_get(unsigned dims, PyObject *boxes, PyObject *obbs,
                        PyObject *xboxes, PyObject *spheres, PyObject *planes,
                        elements *e, rb_shapes *shapes)
{
    memset(e, 0, sizeof *e);
    memset(shapes, 0, sizeof *shapes);
    if (records_get(boxes, box_size(dims), 0, "boxes", &e->boxes) < 0 ||
        records_get(obbs, sizeof(rb_obb), 0, "obbs", &e->obbs) < 0 ||
        records_get(xboxes, sizeof(rb_xbox), 0, "xboxes", &e->xboxes) < 0 ||
        records_get(spheres, sizeof(rb_sphere), 0, "spheres", &e->spheres) < 0 ||
        records_get(planes, sizeof(rb_plane), 0, "planes", &e->planes) < 0)
        return -1;
    shapes->obbs = e->obbs.view.buf;
    shapes->n_obbs = e->obbs.n;
    shapes->xboxes = e->xboxes.view.buf;
    shapes->n_xboxes = e->xboxes.n;
    shapes->spheres = e->spheres.view.buf;
    shapes->n_spheres = e->spheres.n;
    shapes->planes = e->planes.view.buf;
    shapes->n_planes = e->planes.n;
    return 0;
}

static char *query_kwlist[] = {"mode", "dims", "rays", "boxes", "obbs",
                               "xboxes", "spheres", "planes", "max_hits",
                               "normals", "hits", "any", "counts", "list",
                               "kinds", "out_normals", NULL};

/* Context.intersect(mode, dims, rays, boxes, obbs, xboxes, spheres, planes,
 * max_hits, normals, hits, any, counts, list, kinds, out_normals): a query
 * against the elements given; fills the outputs; returns the run info. */
static PyObject *Context_intersect(ContextObject *self, PyObject *args,
                                   PyObject *kw)
{
    int mode_i;
    unsigned dims, max_hits = 0;
    int normals = 0;
    PyObject *rays_o, *boxes = Py_None, *obbs = Py_None, *xboxes = Py_None,
             *spheres = Py_None, *planes = Py_None, *hits = Py_None,
             *any = Py_None, *counts = Py_None, *list = Py_None,
             *kinds = Py_None, *normals_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iIO|OOOOOIpOOOOOO",
                                     query_kwlist, &mode_i, &dims, &rays_o,
                                     &boxes, &obbs, &xboxes, &spheres, &planes,
                                     &max_hits, &normals, &hits, &any, &counts,
                                     &list, &kinds, &normals_o))
        return NULL;
    rb_mode mode;
    if (context_ready(self) < 0 || mode_from(mode_i, &mode) < 0 ||
        dims_ok(dims) < 0)
        return NULL;
    records rays;
    elements el;
    outputs out;
    rb_shapes shapes;
    PyObject *ret = NULL;
    memset(&el, 0, sizeof el);
    memset(&out, 0, sizeof out);
    if (records_get(rays_o, ray_size(dims), 0, "rays", &rays) < 0 ||
        elements_get(dims, boxes, obbs, xboxes, spheres, planes, &el,
                     &shapes) < 0 ||
        outputs_get(hits, any, counts, list, kinds, normals_o, &out) < 0)
        goto done;
    rb_results res;
    if (outputs_bind(&out, mode, rays.n, max_hits, normals, &res) < 0)
        goto done;
    static const float none[8];
    rb_query q = {
        .mode = mode,
        .dims = dims,
        .rays = rays.n ? rays.view.buf : none,
        .n_rays = rays.n,
        .boxes = el.boxes.n ? el.boxes.view.buf : none,
        .n_boxes = el.boxes.n,
        .max_hits = max_hits,
        .shapes = shapes,
        .outputs = normals ? RB_OUTPUT_NORMAL : 0,
    };
    ret = run_query(self, &q, &res);
done:
    records_release(&rays);
    elements_release(&el);
    outputs_release(&out);
    return ret;
}

static PyObject *Context_obb_from_quaternion(PyObject *unused, PyObject *args)
{
    /* (records of 10 floats: center 3, half 3, q wxyz 4) -> bytes of
     * rb_obb records; InputError names the first bad one. */
    PyObject *src_o;
    if (!PyArg_ParseTuple(args, "O", &src_o))
        return NULL;
    records src;
    if (records_get(src_o, 40, 0, "obbs", &src) < 0) {
        records_release(&src);
        return NULL;
    }
    PyObject *outb = PyBytes_FromStringAndSize(NULL,
                                               (Py_ssize_t)(src.n * sizeof(rb_obb)));
    if (!outb) {
        records_release(&src);
        return NULL;
    }
    const float *in = src.view.buf;
    rb_obb *o = (rb_obb *)PyBytes_AS_STRING(outb);
    for (size_t i = 0; i < src.n; i++) {
        const float *r = in + 10 * i;
        if (rb_obb_from_quaternion(r, r + 3, r + 6, &o[i]) != RB_OK) {
            rb_error err = {.status = RB_EINPUT, .element = RB_ELEMENT_OBB,
                            .index = i, .field = 6};
            snprintf(err.message, sizeof err.message,
                     "obb %zu: the quaternion is zero or not finite", i);
            records_release(&src);
            Py_DECREF(outb);
            return raise_status(RB_EINPUT, &err);
        }
    }
    records_release(&src);
    return outb;
}

static PyMethodDef Context_methods[] = {
    {"info", (PyCFunction)Context_info, METH_NOARGS,
     "info() -> dict: the backend, device and threads of this context"},
    {"intersect", (PyCFunction)(void (*)(void))Context_intersect,
     METH_VARARGS | METH_KEYWORDS,
     "intersect(mode, dims, rays, boxes, obbs, xboxes, spheres, planes, "
     "max_hits, normals, hits, any, counts, list, kinds, out_normals) -> "
     "run info; fills the output buffers"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ContextType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "raybox._native.Context",
    .tp_basicsize = sizeof(ContextObject),
    .tp_dealloc = (destructor)Context_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Context(backend='auto', threads=0, device=None): one "
              "libraybox context (rb_context)",
    .tp_methods = Context_methods,
    .tp_init = (initproc)Context_init,
    .tp_new = PyType_GenericNew,
};

/* ---- Scene -------------------------------------------------------------- */

static int Scene_init(SceneObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"context", "dims", "boxes", "obbs", "xboxes",
                             "spheres", "planes", NULL};
    ContextObject *c;
    unsigned dims;
    PyObject *boxes = Py_None, *obbs = Py_None, *xboxes = Py_None,
             *spheres = Py_None, *planes = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!I|OOOOO", kwlist,
                                     &ContextType, &c, &dims, &boxes, &obbs,
                                     &xboxes, &spheres, &planes))
        return -1;
    if (self->scene) {
        PyErr_SetString(PyExc_RuntimeError, "Scene is already initialised");
        return -1;
    }
    if (context_ready(c) < 0 || dims_ok(dims) < 0)
        return -1;
    elements el;
    rb_shapes shapes;
    int ret = -1;
    if (elements_get(dims, boxes, obbs, xboxes, spheres, planes, &el,
                     &shapes) < 0)
        goto done;
    rb_scene *scene = NULL;
    rb_error err;
    int rc;
    static const float none[6];
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(c->lock, WAIT_LOCK);
    rc = rb_scene_create_shapes(c->ctx, dims,
                                el.boxes.n ? el.boxes.view.buf : none,
                                el.boxes.n, &shapes, &scene);
    if (rc != RB_OK)
        err = *rb_context_error(c->ctx);
    PyThread_release_lock(c->lock);
    Py_END_ALLOW_THREADS
    if (rc != RB_OK) {
        raise_status(rc, &err);
        goto done;
    }
    self->scene = scene;
    self->dims = dims;
    Py_INCREF(c);
    self->owner = c;
    ret = 0;
done:
    elements_release(&el);
    return ret;
}

static void Scene_dealloc(SceneObject *self)
{
    rb_scene_destroy(self->scene);
    Py_XDECREF(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int scene_ready(SceneObject *self)
{
    if (!self->scene) {
        PyErr_SetString(PyExc_RuntimeError, "Scene is not initialised");
        return -1;
    }
    return 0;
}

static PyObject *Scene_intersect(SceneObject *self, PyObject *args,
                                 PyObject *kw)
{
    static char *kwlist[] = {"mode", "rays", "max_hits", "normals", "hits",
                             "any", "counts", "list", "kinds", "out_normals",
                             NULL};
    int mode_i, normals = 0;
    unsigned max_hits = 0;
    PyObject *rays_o, *hits = Py_None, *any = Py_None, *counts = Py_None,
             *list = Py_None, *kinds = Py_None, *normals_o = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iO|IpOOOOOO", kwlist, &mode_i,
                                     &rays_o, &max_hits, &normals, &hits, &any,
                                     &counts, &list, &kinds, &normals_o))
        return NULL;
    rb_mode mode;
    if (scene_ready(self) < 0 || mode_from(mode_i, &mode) < 0)
        return NULL;
    if (mode == RB_MODE_PAIRS) {
        PyErr_SetString(PyExc_ValueError,
                        "mode pairs: a scene answers every-box modes only");
        return NULL;
    }
    records rays;
    outputs out;
    PyObject *ret = NULL;
    memset(&out, 0, sizeof out);
    if (records_get(rays_o, ray_size(self->dims), 0, "rays", &rays) < 0 ||
        outputs_get(hits, any, counts, list, kinds, normals_o, &out) < 0)
        goto done;
    rb_results res;
    if (outputs_bind(&out, mode, rays.n, max_hits, normals, &res) < 0)
        goto done;
    static const float none[8];
    rb_query q = {
        .mode = mode,
        .dims = self->dims,
        .rays = rays.n ? rays.view.buf : none,
        .n_rays = rays.n,
        .scene = self->scene,
        .max_hits = max_hits,
        .outputs = normals ? RB_OUTPUT_NORMAL : 0,
    };
    ret = run_query(self->owner, &q, &res);
done:
    records_release(&rays);
    outputs_release(&out);
    return ret;
}

/* Scene.set(ids, boxes): ids a buffer of uint32, boxes of box records. */
static PyObject *Scene_set(SceneObject *self, PyObject *args)
{
    PyObject *ids_o, *boxes_o;
    if (!PyArg_ParseTuple(args, "OO", &ids_o, &boxes_o))
        return NULL;
    if (scene_ready(self) < 0)
        return NULL;
    records ids, boxes;
    memset(&boxes, 0, sizeof boxes);
    PyObject *ret = NULL;
    if (records_get(ids_o, 4, 0, "ids", &ids) < 0 ||
        records_get(boxes_o, box_size(self->dims), 0, "boxes", &boxes) < 0)
        goto done;
    if (ids.n != boxes.n) {
        PyErr_Format(PyExc_ValueError, "set: %zu ids but %zu boxes", ids.n,
                     boxes.n);
        goto done;
    }
    ContextObject *c = self->owner;
    rb_error err;
    int rc;
    static const uint32_t none_ids[1];
    static const float none[6];
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(c->lock, WAIT_LOCK);
    rc = rb_scene_set(c->ctx, self->scene,
                      ids.n ? ids.view.buf : none_ids,
                      boxes.n ? boxes.view.buf : none, ids.n);
    if (rc != RB_OK)
        err = *rb_context_error(c->ctx);
    PyThread_release_lock(c->lock);
    Py_END_ALLOW_THREADS
    if (rc != RB_OK)
        raise_status(rc, &err);
    else
        ret = Py_NewRef(Py_None);
done:
    records_release(&ids);
    records_release(&boxes);
    return ret;
}

static PyObject *Scene_append(SceneObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"boxes", "obbs", "xboxes", "spheres", "planes",
                             NULL};
    PyObject *boxes = Py_None, *obbs = Py_None, *xboxes = Py_None,
             *spheres = Py_None, *planes = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOOOO", kwlist, &boxes, &obbs,
                                     &xboxes, &spheres, &planes))
        return NULL;
    if (scene_ready(self) < 0)
        return NULL;
    elements el;
    rb_shapes shapes;
    PyObject *ret = NULL;
    if (elements_get(self->dims, boxes, obbs, xboxes, spheres, planes, &el,
                     &shapes) < 0)
        goto done;
    ContextObject *c = self->owner;
    rb_error err;
    int rc;
    static const float none[6];
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(c->lock, WAIT_LOCK);
    rc = rb_scene_append_shapes(c->ctx, self->scene,
                                el.boxes.n ? el.boxes.view.buf : none,
                                el.boxes.n, &shapes);
    if (rc != RB_OK)
        err = *rb_context_error(c->ctx);
    PyThread_release_lock(c->lock);
    Py_END_ALLOW_THREADS
    if (rc != RB_OK)
        raise_status(rc, &err);
    else
        ret = Py_NewRef(Py_None);
done:
    elements_release(&el);
    return ret;
}

static PyObject *floats3(const float v[3])
{
    return Py_BuildValue("(fff)", v[0], v[1], v[2]);
}

static PyObject *Scene_stats(SceneObject *self, PyObject *unused)
{
    if (scene_ready(self) < 0)
        return NULL;
    rb_scene_stats st;
    ContextObject *c = self->owner;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(c->lock, WAIT_LOCK);
    rb_scene_stats_get(self->scene, &st);
    PyThread_release_lock(c->lock);
    Py_END_ALLOW_THREADS
    PyObject *kinds = Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K}", "boxes",
        (unsigned long long)st.kinds[RB_KIND_BOX], "obbs",
        (unsigned long long)st.kinds[RB_KIND_OBB], "xboxes",
        (unsigned long long)st.kinds[RB_KIND_XBOX], "spheres",
        (unsigned long long)st.kinds[RB_KIND_SPHERE], "planes",
        (unsigned long long)st.kinds[RB_KIND_PLANE]);
    PyObject *bmin = floats3(st.bounds_min), *bmax = floats3(st.bounds_max);
    PyObject *ret = NULL;
    if (kinds && bmin && bmax)
        ret = Py_BuildValue(
            "{s:I,s:K,s:K,s:O,s:K,s:O,s:O,s:K,s:K,s:I,s:d,s:d,s:d,s:K,s:K,"
            "s:K}",
            "dims", st.dims, "elements", (unsigned long long)st.elements,
            "boxes", (unsigned long long)st.boxes, "kinds", kinds, "version",
            (unsigned long long)st.version, "bounds_min", bmin, "bounds_max",
            bmax, "host_bytes", (unsigned long long)st.host_bytes,
            "bvh_nodes", (unsigned long long)st.bvh_nodes, "bvh_depth",
            st.bvh_depth, "bvh_sah", st.bvh_sah, "bvh_sah_built",
            st.bvh_sah_built, "bvh_build_ms", st.bvh_build_ms, "bvh_refits",
            (unsigned long long)st.bvh_refits, "bvh_rebuilds",
            (unsigned long long)st.bvh_rebuilds, "shape_nodes",
            (unsigned long long)st.shape_nodes);
    Py_XDECREF(kinds);
    Py_XDECREF(bmin);
    Py_XDECREF(bmax);
    return ret;
}

static PyObject *Scene_element_kind(SceneObject *self, PyObject *arg)
{
    if (scene_ready(self) < 0)
        return NULL;
    unsigned long long id = PyLong_AsUnsignedLongLong(arg);
    if (id == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    size_t index = 0;
    ContextObject *c = self->owner;
    int k;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(c->lock, WAIT_LOCK);
    k = rb_scene_element_kind(self->scene, id, &index);
    PyThread_release_lock(c->lock);
    Py_END_ALLOW_THREADS
    if (k < 0) {
        PyErr_Format(PyExc_IndexError, "id %llu: not in the scene", id);
        return NULL;
    }
    return Py_BuildValue("(sn)", rb_kind_name(k), (Py_ssize_t)index);
}

static PyMethodDef Scene_methods[] = {
    {"intersect", (PyCFunction)(void (*)(void))Scene_intersect,
     METH_VARARGS | METH_KEYWORDS,
     "intersect(mode, rays, max_hits, normals, hits, any, counts, list, "
     "kinds, out_normals) -> run info"},
    {"set", (PyCFunction)Scene_set, METH_VARARGS,
     "set(ids, boxes): replace boxes by id (rb_scene_set)"},
    {"append", (PyCFunction)(void (*)(void))Scene_append,
     METH_VARARGS | METH_KEYWORDS,
     "append(boxes, obbs, xboxes, spheres, planes) (rb_scene_append_shapes)"},
    {"stats", (PyCFunction)Scene_stats, METH_NOARGS,
     "stats() -> dict (rb_scene_stats)"},
    {"element_kind", (PyCFunction)Scene_element_kind, METH_O,
     "element_kind(id) -> (kind name, index within the kind)"},
    {NULL, NULL, 0, NULL}};

static PyObject *Scene_dims(SceneObject *self, void *unused)
{
    return PyLong_FromUnsignedLong(self->dims);
}

static PyGetSetDef Scene_getset[] = {
    {"dims", (getter)Scene_dims, NULL, "2 or 3", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject SceneType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "raybox._native.Scene",
    .tp_basicsize = sizeof(SceneObject),
    .tp_dealloc = (destructor)Scene_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Scene(context, dims, boxes, obbs, xboxes, spheres, planes): "
              "an rb_scene made and changed through one Context",
    .tp_methods = Scene_methods,
    .tp_getset = Scene_getset,
    .tp_init = (initproc)Scene_init,
    .tp_new = PyType_GenericNew,
};

/* ---- module ------------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"obb_from_quaternion", Context_obb_from_quaternion, METH_VARARGS,
     "obb_from_quaternion(records of 10 float32) -> bytes of rb_obb records"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "raybox._native",
    "libraybox for Python: see the raybox package", -1, module_methods,
    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void);
PyMODINIT_FUNC PyInit__native(void)
{
    _Static_assert(sizeof(rb_ray) == 32 && sizeof(rb_hit) == 16 &&
                       sizeof(rb_list_hit) == 12 && sizeof(rb_obb) == 60 &&
                       sizeof(rb_xbox) == 72,
                   "record sizes of docs/binary-format.md");
    if (PyType_Ready(&ContextType) < 0 || PyType_Ready(&SceneType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (!m)
        return NULL;
    raybox_error = PyErr_NewExceptionWithDoc(
        "raybox.Error", "A libraybox call failed (attribute status: its "
        "short name, e.g. 'device_error').", NULL, NULL);
    PyObject *bases = raybox_error
        ? PyTuple_Pack(2, raybox_error, PyExc_ValueError) : NULL;
    raybox_input_error = bases ? PyErr_NewExceptionWithDoc(
        "raybox.InputError", "An invalid ray, box or other element (SPEC R6) "
        "or argument; attributes element ('ray', 'box', ...), index and "
        "field name it.", bases, NULL) : NULL;
    Py_XDECREF(bases);
    if (!raybox_input_error ||
        PyModule_AddObjectRef(m, "Error", raybox_error) < 0 ||
        PyModule_AddObjectRef(m, "InputError", raybox_input_error) < 0 ||
        PyModule_AddObjectRef(m, "Context", (PyObject *)&ContextType) < 0 ||
        PyModule_AddObjectRef(m, "Scene", (PyObject *)&SceneType) < 0 ||
        PyModule_AddStringConstant(m, "version", RB_VERSION_STRING) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
