/* The lab's variant (a): the per-event work as a hand-written CPython extension (3.10+ C API; measured on 3.11).
 *
 * Acct          one stream's hot state in C fields (counts, the pull's start, the gap buckets' count and sum)
 * Observe       the sync observing iterator (tp_iternext): times each pull, accounts each item, calls on_end once
 * ObserveAsync  the async one: __anext__ returns a Step, an awaitable that drives the inner __anext__'s awaitable
 *               with PyIter_Send (am_send) and accounts the item when it returns
 * keepalives()  the body reader's comment-line count per chunk (memchr, no method call)
 * Reader        the sync body reader: the chunks passed on, counted
 *
 * A clock of None reads CLOCK_MONOTONIC directly (what time.monotonic_ns reads); any other clock is called. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>
#include <time.h>

#define N_BOUNDS 17
#define N_BUCKETS (N_BOUNDS + 1)

static const long long BOUNDS[N_BOUNDS] = {
    1000000LL, 2500000LL, 5000000LL, 10000000LL, 20000000LL, 40000000LL, 80000000LL, 160000000LL, 320000000LL,
    640000000LL, 1280000000LL, 2560000000LL, 5120000000LL, 10240000000LL, 20480000000LL, 40960000000LL,
    81920000000LL};

/* ------------------------------------------------------------------------------------------------ Acct */

typedef struct {
    PyObject_HEAD
    PyObject *clock; /* NULL: the native monotonic clock */
    PyObject *pulling;
    long long events, deltas, t_pull, wait_ns, t_first_delta, t_prev_delta, keepalives;
    int line_start;
    long long counts[N_BUCKETS];
    long long sums[N_BUCKETS];
} Acct;

static PyTypeObject AcctType;

static int acct_now(Acct *a, long long *out) {
    if (a->clock == NULL) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        *out = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        return 0;
    }
    PyObject *r = PyObject_CallNoArgs(a->clock);
    if (r == NULL) return -1;
    long long v = PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (v == -1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

static void acct_account(Acct *a, PyObject *item, long long now) {
    long long tp = a->t_pull;
    if (tp) {
        a->t_pull = 0;
        a->wait_ns += now - tp;
    }
    a->events++;
    if (PyUnicode_CheckExact(item) && PyUnicode_GET_LENGTH(item)) {
        a->deltas++;
        long long prev = a->t_prev_delta;
        a->t_prev_delta = now;
        if (prev) {
            long long gap = now - prev;
            int i = 0;
            while (i < N_BOUNDS && gap > BOUNDS[i]) i++;
            a->counts[i]++;
            a->sums[i] += gap;
        } else {
            a->t_first_delta = now;
        }
    }
}

static int acct_init(Acct *a, PyObject *args, PyObject *kw) {
    PyObject *clock = Py_None;
    if (!PyArg_ParseTuple(args, "|O", &clock)) return -1;
    Py_CLEAR(a->clock);
    if (clock != Py_None) {
        Py_INCREF(clock);
        a->clock = clock;
    }
    a->line_start = 1;
    return 0;
}

static int acct_traverse(Acct *a, visitproc visit, void *arg) {
    Py_VISIT(a->clock);
    Py_VISIT(a->pulling);
    return 0;
}

static int acct_clear(Acct *a) {
    Py_CLEAR(a->clock);
    Py_CLEAR(a->pulling);
    return 0;
}

static void acct_dealloc(Acct *a) {
    PyObject_GC_UnTrack(a);
    acct_clear(a);
    Py_TYPE(a)->tp_free((PyObject *)a);
}

static PyObject *ll_tuple(const long long *v) {
    PyObject *t = PyTuple_New(N_BUCKETS);
    if (t == NULL) return NULL;
    for (int i = 0; i < N_BUCKETS; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (x == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

static PyObject *acct_counts(Acct *a, void *c) { return ll_tuple(a->counts); }
static PyObject *acct_sums(Acct *a, void *c) { return ll_tuple(a->sums); }

static PyObject *acct_get_pulling(Acct *a, void *c) {
    PyObject *p = a->pulling ? a->pulling : Py_None;
    Py_INCREF(p);
    return p;
}

static PyObject *acct_get_clock(Acct *a, void *c) {
    PyObject *p = a->clock ? a->clock : Py_None;
    Py_INCREF(p);
    return p;
}

/* the snapshot the differential test compares: the same tuple as lab.pure.Acct.snapshot() */
static PyObject *acct_snapshot(Acct *a, PyObject *unused) {
    PyObject *c = ll_tuple(a->counts), *s = ll_tuple(a->sums);
    if (c == NULL || s == NULL) {
        Py_XDECREF(c);
        Py_XDECREF(s);
        return NULL;
    }
    return Py_BuildValue("(LLLLLLLONN)", a->events, a->deltas, a->t_pull, a->wait_ns, a->t_first_delta,
                         a->t_prev_delta, a->keepalives, a->line_start ? Py_True : Py_False, c, s);
}

static PyMemberDef acct_members[] = {
    {"events", T_LONGLONG, offsetof(Acct, events), 0, NULL},
    {"deltas", T_LONGLONG, offsetof(Acct, deltas), 0, NULL},
    {"t_pull", T_LONGLONG, offsetof(Acct, t_pull), 0, NULL},
    {"wait_ns", T_LONGLONG, offsetof(Acct, wait_ns), 0, NULL},
    {"t_first_delta", T_LONGLONG, offsetof(Acct, t_first_delta), 0, NULL},
    {"t_prev_delta", T_LONGLONG, offsetof(Acct, t_prev_delta), 0, NULL},
    {"keepalives", T_LONGLONG, offsetof(Acct, keepalives), 0, NULL},
    {"line_start", T_BOOL, offsetof(Acct, line_start), 0, NULL},
    {NULL}};

static PyGetSetDef acct_getset[] = {
    {"counts", (getter)acct_counts, NULL, NULL, NULL},
    {"sums", (getter)acct_sums, NULL, NULL, NULL},
    {"pulling", (getter)acct_get_pulling, NULL, NULL, NULL},
    {"clock", (getter)acct_get_clock, NULL, NULL, NULL},
    {NULL}};

static PyMethodDef acct_methods[] = {{"snapshot", (PyCFunction)acct_snapshot, METH_NOARGS, NULL}, {NULL}};

static PyTypeObject AcctType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lab._cext.Acct",
    .tp_basicsize = sizeof(Acct),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)acct_init,
    .tp_dealloc = (destructor)acct_dealloc,
    .tp_traverse = (traverseproc)acct_traverse,
    .tp_clear = (inquiry)acct_clear,
    .tp_members = acct_members,
    .tp_getset = acct_getset,
    .tp_methods = acct_methods,
};

/* ------------------------------------------------------------------------------------------ keepalives */

static Py_ssize_t count_pair(const char *p, Py_ssize_t n, char first) {
    Py_ssize_t found = 0;
    const char *end = p + n;
    while (p < end) {
        const char *q = memchr(p, first, (size_t)(end - p));
        if (q == NULL || q + 1 >= end) break;
        if (q[1] == ':') found++;
        p = q + 1;
    }
    return found;
}

static void acct_scan(Acct *a, const char *p, Py_ssize_t n) {
    if (n == 0) return;
    Py_ssize_t found = count_pair(p, n, '\n');
    if (memchr(p, '\r', (size_t)n) != NULL) found += count_pair(p, n, '\r');
    if (a->line_start && p[0] == ':') found++;
    a->keepalives += found;
    a->line_start = p[n - 1] == '\n' || p[n - 1] == '\r';
}

static PyObject *mod_keepalives(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyObject_TypeCheck(args[0], &AcctType) || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "keepalives(acct, chunk: bytes)");
        return NULL;
    }
    acct_scan((Acct *)args[0], PyBytes_AS_STRING(args[1]), PyBytes_GET_SIZE(args[1]));
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------- the end, once */

/* How the stream ended: on_end(acct, exc or None), once. With an exception pending (exc_pending), it is handed over
 * and restored afterwards, unless on_end raised (then its error is what propagates). */
static int call_on_end(PyObject *on_end, Acct *a, int exc_pending) {
    if (!exc_pending) {
        PyObject *r = PyObject_CallFunctionObjArgs(on_end, (PyObject *)a, Py_None, NULL);
        if (r == NULL) return -1;
        Py_DECREF(r);
        return 0;
    }
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL) PyException_SetTraceback(value, tb);
    PyObject *r = PyObject_CallFunctionObjArgs(on_end, (PyObject *)a, value, NULL);
    if (r == NULL) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        return -1;
    }
    Py_DECREF(r);
    PyErr_Restore(type, value, tb);
    return 0;
}

/* ------------------------------------------------------------------------------------------- Observe */

typedef struct {
    PyObject_HEAD
    PyObject *it;
    Acct *acct;
    PyObject *on_end;
    int state; /* 0 not pulled yet, 1 running, 2 ended */
} Observe;

static PyObject *observe_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *iterable, *on_end;
    Acct *acct;
    if (!PyArg_ParseTuple(args, "OO!O", &iterable, &AcctType, &acct, &on_end)) return NULL;
    PyObject *it = PyObject_GetIter(iterable);
    if (it == NULL) return NULL;
    Observe *o = (Observe *)type->tp_alloc(type, 0);
    if (o == NULL) {
        Py_DECREF(it);
        return NULL;
    }
    o->it = it;
    Py_INCREF(acct);
    o->acct = acct;
    Py_INCREF(on_end);
    o->on_end = on_end;
    return (PyObject *)o;
}

static PyObject *observe_next(Observe *o) {
    if (o->state == 2) return NULL;
    o->state = 1;
    Acct *a = o->acct;
    long long now;
    PyObject *item = NULL;
    if (acct_now(a, &a->t_pull) < 0) goto fail;
    item = Py_TYPE(o->it)->tp_iternext(o->it);
    if (item == NULL) {
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_StopIteration)) goto fail;
            PyErr_Clear();
        }
        o->state = 2;
        call_on_end(o->on_end, a, 0);
        return NULL;
    }
    if (acct_now(a, &now) < 0) goto fail;
    acct_account(a, item, now);
    return item;
fail:
    Py_XDECREF(item);
    o->state = 2;
    call_on_end(o->on_end, a, 1);
    return NULL;
}

/* close(): as a generator's close: a started stream ends with GeneratorExit; the inner iterator is closed. */
static PyObject *observe_close(Observe *o, PyObject *unused) {
    if (o->state == 1) {
        o->state = 2;
        PyErr_SetNone(PyExc_GeneratorExit);
        if (call_on_end(o->on_end, o->acct, 1) == 0) PyErr_Clear();
        else return NULL;
    }
    o->state = 2;
    PyObject *close = PyObject_GetAttrString(o->it, "close");
    if (close == NULL) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *r = PyObject_CallNoArgs(close);
    Py_DECREF(close);
    return r;
}

static void observe_finalize(Observe *o) {
    if (o->state != 1) return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *r = observe_close(o, NULL);
    if (r == NULL) PyErr_WriteUnraisable((PyObject *)o);
    else Py_DECREF(r);
    PyErr_Restore(type, value, tb);
}

static int observe_traverse(Observe *o, visitproc visit, void *arg) {
    Py_VISIT(o->it);
    Py_VISIT(o->acct);
    Py_VISIT(o->on_end);
    return 0;
}

static int observe_clear(Observe *o) {
    Py_CLEAR(o->it);
    Py_CLEAR(o->acct);
    Py_CLEAR(o->on_end);
    return 0;
}

static void observe_dealloc(Observe *o) {
    if (PyObject_CallFinalizerFromDealloc((PyObject *)o) < 0) return; /* resurrected */
    PyObject_GC_UnTrack(o);
    observe_clear(o);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyMethodDef observe_methods[] = {{"close", (PyCFunction)observe_close, METH_NOARGS, NULL}, {NULL}};

static PyTypeObject ObserveType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lab._cext.Observe",
    .tp_basicsize = sizeof(Observe),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = observe_new,
    .tp_dealloc = (destructor)observe_dealloc,
    .tp_finalize = (destructor)observe_finalize,
    .tp_traverse = (traverseproc)observe_traverse,
    .tp_clear = (inquiry)observe_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)observe_next,
    .tp_methods = observe_methods,
};

/* -------------------------------------------------------------------------------------------- Reader */

typedef struct {
    PyObject_HEAD
    PyObject *it;
    Acct *acct;
} Reader;

static PyObject *reader_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *iterable;
    Acct *acct;
    if (!PyArg_ParseTuple(args, "OO!", &iterable, &AcctType, &acct)) return NULL;
    PyObject *it = PyObject_GetIter(iterable);
    if (it == NULL) return NULL;
    Reader *r = (Reader *)type->tp_alloc(type, 0);
    if (r == NULL) {
        Py_DECREF(it);
        return NULL;
    }
    r->it = it;
    Py_INCREF(acct);
    r->acct = acct;
    return (PyObject *)r;
}

static PyObject *reader_next(Reader *r) {
    PyObject *chunk = Py_TYPE(r->it)->tp_iternext(r->it);
    if (chunk != NULL && PyBytes_Check(chunk)) acct_scan(r->acct, PyBytes_AS_STRING(chunk), PyBytes_GET_SIZE(chunk));
    return chunk;
}

static int reader_traverse(Reader *r, visitproc visit, void *arg) {
    Py_VISIT(r->it);
    Py_VISIT(r->acct);
    return 0;
}

static int reader_clear(Reader *r) {
    Py_CLEAR(r->it);
    Py_CLEAR(r->acct);
    return 0;
}

static void reader_dealloc(Reader *r) {
    PyObject_GC_UnTrack(r);
    reader_clear(r);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lab._cext.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = reader_new,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_traverse = (traverseproc)reader_traverse,
    .tp_clear = (inquiry)reader_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)reader_next,
};

/* ------------------------------------------------------------------------------ ObserveAsync and Step */

typedef struct {
    PyObject_HEAD
    PyObject *ait;
    Acct *acct;
    PyObject *on_end;
    PyObject *whoami;
    int state; /* 0 not pulled yet, 1 running, 2 ended */
    PyObject *cached; /* one Step reused pull after pull while nobody else holds it */
} ObserveAsync;

/* A pull: ``owner`` is held from __anext__ until the pull returns or fails, then cleared (no lasting cycle with the
 * observer, which caches one Step for the next pull). */
typedef struct {
    PyObject_HEAD
    ObserveAsync *owner;
    PyObject *inner; /* the inner __anext__'s awaitable iterator while this pull runs */
} Step;

static PyTypeObject ObserveAsyncType, StepType;

static PyObject *oa_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *ait, *on_end, *whoami;
    Acct *acct;
    if (!PyArg_ParseTuple(args, "OO!OO", &ait, &AcctType, &acct, &on_end, &whoami)) return NULL;
    ObserveAsync *o = (ObserveAsync *)type->tp_alloc(type, 0);
    if (o == NULL) return NULL;
    Py_INCREF(ait);
    o->ait = ait;
    Py_INCREF(acct);
    o->acct = acct;
    Py_INCREF(on_end);
    o->on_end = on_end;
    Py_INCREF(whoami);
    o->whoami = whoami;
    return (PyObject *)o;
}

static PyObject *oa_anext(ObserveAsync *o) {
    Step *s = (Step *)o->cached;
    if (s != NULL && Py_REFCNT(s) == 1 && s->owner == NULL) { /* the last pull's Step, done and held by us alone */
        Py_INCREF(o);
        s->owner = o;
        Py_INCREF(s);
        return (PyObject *)s;
    }
    s = PyObject_GC_New(Step, &StepType);
    if (s == NULL) return NULL;
    Py_INCREF(o);
    s->owner = o;
    s->inner = NULL;
    PyObject_GC_Track(s);
    if (o->cached == NULL) {
        Py_INCREF(s);
        o->cached = (PyObject *)s;
    }
    return (PyObject *)s;
}

static int oa_traverse(ObserveAsync *o, visitproc visit, void *arg) {
    Py_VISIT(o->ait);
    Py_VISIT(o->acct);
    Py_VISIT(o->on_end);
    Py_VISIT(o->whoami);
    Py_VISIT(o->cached);
    return 0;
}

static int oa_clear(ObserveAsync *o) {
    Py_CLEAR(o->cached);
    Py_CLEAR(o->ait);
    Py_CLEAR(o->acct);
    Py_CLEAR(o->on_end);
    Py_CLEAR(o->whoami);
    return 0;
}

static void oa_dealloc(ObserveAsync *o) {
    PyObject_GC_UnTrack(o);
    oa_clear(o);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyAsyncMethods oa_async = {.am_aiter = PyObject_SelfIter, .am_anext = (unaryfunc)oa_anext};

static PyTypeObject ObserveAsyncType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lab._cext.ObserveAsync",
    .tp_basicsize = sizeof(ObserveAsync),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = oa_new,
    .tp_dealloc = (destructor)oa_dealloc,
    .tp_traverse = (traverseproc)oa_traverse,
    .tp_clear = (inquiry)oa_clear,
    .tp_as_async = &oa_async,
};

/* The pull ended with an error (pending): StopAsyncIteration is the stream's end (on_end(acct, None)), anything else
 * is handed to on_end; either propagates. */
static void step_failed_owned_by(Step *s, ObserveAsync *o);

static void step_release(Step *s) { /* the pull is over without an end to record */
    Py_CLEAR(s->inner);
    Py_CLEAR(s->owner);
}

static void step_failed(Step *s) {
    ObserveAsync *o = s->owner;
    if (o == NULL) return;
    s->owner = NULL;
    step_failed_owned_by(s, o);
    Py_DECREF(o);
}

static void step_failed_owned_by(Step *s, ObserveAsync *o) {
    Py_CLEAR(s->inner);
    if (o->state == 2) return;
    o->state = 2;
    if (PyErr_ExceptionMatches(PyExc_StopAsyncIteration)) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (call_on_end(o->on_end, o->acct, 0) < 0) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            return;
        }
        PyErr_Restore(type, value, tb);
        return;
    }
    call_on_end(o->on_end, o->acct, 1);
}

/* The item arrived: account it (the pull's identity cleared first, as the pure path does). */
static int step_item(Step *s, PyObject *item) {
    ObserveAsync *o = s->owner;
    Acct *a = o->acct;
    long long now;
    Py_CLEAR(s->inner);
    Py_CLEAR(a->pulling);
    if (acct_now(a, &now) < 0) return -1; /* the caller fails the step, which releases the owner */
    acct_account(a, item, now);
    s->owner = NULL;
    Py_DECREF(o);
    return 0;
}

/* Start the pull: its identity, its clock, the inner __anext__'s awaitable. */
static int step_start(Step *s) {
    ObserveAsync *o = s->owner;
    Acct *a = o->acct;
    if (o->state == 2) {
        PyErr_SetNone(PyExc_StopAsyncIteration);
        return -1;
    }
    o->state = 1;
    PyObject *who = PyObject_CallNoArgs(o->whoami);
    if (who == NULL) return -2;
    Py_XSETREF(a->pulling, who);
    if (acct_now(a, &a->t_pull) < 0) return -2;
    PyAsyncMethods *am = Py_TYPE(o->ait)->tp_as_async;
    if (am == NULL || am->am_anext == NULL) {
        PyErr_SetString(PyExc_TypeError, "not an async iterator");
        return -2;
    }
    PyObject *aw = am->am_anext(o->ait);
    if (aw == NULL) return -2;
    PyAsyncMethods *am2 = Py_TYPE(aw)->tp_as_async;
    if (am2 == NULL || am2->am_await == NULL) {
        Py_DECREF(aw);
        PyErr_SetString(PyExc_TypeError, "__anext__ returned a non-awaitable");
        return -2;
    }
    s->inner = am2->am_await(aw);
    Py_DECREF(aw);
    return s->inner == NULL ? -2 : 0;
}

static PySendResult step_am_send(Step *s, PyObject *arg, PyObject **result) {
    *result = NULL;
    if (s->owner == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cannot reuse an already awaited __anext__()");
        return PYGEN_ERROR;
    }
    if (s->inner == NULL) {
        int rc = step_start(s);
        if (rc == -1) { /* already ended: StopAsyncIteration, no second on_end */
            step_release(s);
            return PYGEN_ERROR;
        }
        if (rc < 0) {
            step_failed(s);
            return PYGEN_ERROR;
        }
    }
    PyObject *res;
    PySendResult r = PyIter_Send(s->inner, arg, &res);
    if (r == PYGEN_NEXT) {
        *result = res;
        return PYGEN_NEXT;
    }
    if (r == PYGEN_RETURN) {
        if (step_item(s, res) < 0) {
            Py_DECREF(res);
            step_failed(s);
            return PYGEN_ERROR;
        }
        *result = res;
        return PYGEN_RETURN;
    }
    step_failed(s);
    return PYGEN_ERROR;
}

static PyObject *raise_stop(PyObject *value) {
    PyObject *e = PyObject_CallOneArg(PyExc_StopIteration, value);
    Py_DECREF(value);
    if (e != NULL) {
        PyErr_SetObject(PyExc_StopIteration, e);
        Py_DECREF(e);
    }
    return NULL;
}

static PyObject *step_send_value(Step *s, PyObject *arg) {
    PyObject *res;
    PySendResult r = step_am_send(s, arg, &res);
    if (r == PYGEN_NEXT) return res;
    if (r == PYGEN_RETURN) return raise_stop(res);
    return NULL;
}

static PyObject *step_iternext(Step *s) { return step_send_value(s, Py_None); }

static PyObject *step_send(Step *s, PyObject *arg) { return step_send_value(s, arg); }

static PyObject *step_throw(Step *s, PyObject *args) {
    if (s->owner == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "cannot reuse an already awaited __anext__()");
        return NULL;
    }
    if (s->inner == NULL) { /* nothing awaited yet: raise it here */
        PyObject *typ, *val = NULL, *tb = NULL;
        if (!PyArg_ParseTuple(args, "O|OO", &typ, &val, &tb)) return NULL;
        if (PyExceptionInstance_Check(typ)) PyErr_SetObject((PyObject *)Py_TYPE(typ), typ);
        else PyErr_SetObject(typ, val);
        step_release(s);
        return NULL;
    }
    PyObject *meth = PyObject_GetAttrString(s->inner, "throw");
    if (meth == NULL) {
        step_failed(s);
        return NULL;
    }
    PyObject *res = PyObject_Call(meth, args, NULL);
    Py_DECREF(meth);
    if (res != NULL) return res;
    if (PyErr_ExceptionMatches(PyExc_StopIteration)) { /* the inner pull finished with its item */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        PyObject *item = PyObject_GetAttrString(value, "value");
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        if (item == NULL || step_item(s, item) < 0) {
            Py_XDECREF(item);
            step_failed(s);
            return NULL;
        }
        return raise_stop(item);
    }
    step_failed(s);
    return NULL;
}

static PyObject *step_close(Step *s, PyObject *unused) {
    if (s->inner != NULL) {
        PyObject *r = PyObject_CallMethod(s->inner, "close", NULL);
        step_release(s);
        if (r == NULL) return NULL;
        Py_DECREF(r);
    }
    Py_CLEAR(s->owner);
    Py_RETURN_NONE;
}

static PyObject *step_await(Step *s) {
    Py_INCREF(s);
    return (PyObject *)s;
}

static int step_traverse(Step *s, visitproc visit, void *arg) {
    Py_VISIT(s->owner);
    Py_VISIT(s->inner);
    return 0;
}

static int step_clear(Step *s) {
    Py_CLEAR(s->owner);
    Py_CLEAR(s->inner);
    return 0;
}

static void step_dealloc(Step *s) {
    PyObject_GC_UnTrack(s);
    step_clear(s);
    PyObject_GC_Del(s);
}

static PyMethodDef step_methods[] = {
    {"send", (PyCFunction)step_send, METH_O, NULL},
    {"throw", (PyCFunction)step_throw, METH_VARARGS, NULL},
    {"close", (PyCFunction)step_close, METH_NOARGS, NULL},
    {NULL}};

static PyAsyncMethods step_async = {.am_await = (unaryfunc)step_await, .am_send = (sendfunc)step_am_send};

static PyTypeObject StepType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "lab._cext.Step",
    .tp_basicsize = sizeof(Step),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_dealloc = (destructor)step_dealloc,
    .tp_traverse = (traverseproc)step_traverse,
    .tp_clear = (inquiry)step_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)step_iternext,
    .tp_methods = step_methods,
    .tp_as_async = &step_async,
};

/* ------------------------------------------------------------------------- the flat path's model reads */

/* What otelstream's flat path reads of an SDK model, natively: a model's __dict__ through the object's dict (no
 * attribute lookup: pydantic's __getattr__ is what makes ``m.__dict__`` slow from Python), then dict lookups with
 * interned keys. Each returns the delta's text, or None when the event is not a plain delta of that shape. */

static PyObject *K_choices, *K_usage, *K_error, *K_finish_reason, *K_index, *K_delta, *K_content, *K_type, *K_text,
    *V_content_block_delta, *V_text_delta;

static PyObject *dict_of(PyObject *obj) { /* a new reference, or NULL without an error set */
    PyObject *d = PyObject_GenericGetDict(obj, NULL);
    if (d == NULL) PyErr_Clear();
    return d;
}

static PyObject *chat_text(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "chat_text(chunk, last_choice)");
        return NULL;
    }
    PyObject *d = dict_of(args[0]), *cd = NULL, *dd = NULL, *text = Py_None;
    if (d == NULL) goto done;
    PyObject *choices = PyDict_GetItemWithError(d, K_choices);
    if (choices == NULL || !PyList_CheckExact(choices) || PyList_GET_SIZE(choices) != 1) goto done;
    if (PyDict_GetItemWithError(d, K_usage) != Py_None || PyDict_Contains(d, K_error) != 0) goto done;
    cd = dict_of(PyList_GET_ITEM(choices, 0));
    if (cd == NULL || PyDict_GetItemWithError(cd, K_finish_reason) != Py_None) goto done;
    PyObject *index = PyDict_GetItemWithError(cd, K_index);
    if (index == NULL || PyObject_RichCompareBool(index, args[1], Py_EQ) != 1) goto done;
    PyObject *delta = PyDict_GetItemWithError(cd, K_delta);
    if (delta == NULL || (dd = dict_of(delta)) == NULL) goto done;
    PyObject *content = PyDict_GetItemWithError(dd, K_content);
    if (content != NULL) text = content;
done:
    Py_XDECREF(d);
    Py_XDECREF(cd);
    Py_XDECREF(dd);
    PyErr_Clear();
    Py_INCREF(text);
    return text;
}

static PyObject *messages_text(PyObject *m, PyObject *ev) {
    PyObject *d = dict_of(ev), *dd = NULL, *text = Py_None;
    if (d == NULL) goto done;
    PyObject *type = PyDict_GetItemWithError(d, K_type);
    if (type == NULL || PyObject_RichCompareBool(type, V_content_block_delta, Py_EQ) != 1) goto done;
    PyObject *delta = PyDict_GetItemWithError(d, K_delta);
    if (delta == NULL || (dd = dict_of(delta)) == NULL) goto done;
    type = PyDict_GetItemWithError(dd, K_type);
    if (type == NULL || PyObject_RichCompareBool(type, V_text_delta, Py_EQ) != 1) goto done;
    PyObject *t = PyDict_GetItemWithError(dd, K_text);
    if (t != NULL) text = t;
done:
    Py_XDECREF(d);
    Py_XDECREF(dd);
    PyErr_Clear();
    Py_INCREF(text);
    return text;
}

static int intern_keys(void) {
    struct { PyObject **slot; const char *s; } keys[] = {
        {&K_choices, "choices"}, {&K_usage, "usage"}, {&K_error, "error"}, {&K_finish_reason, "finish_reason"},
        {&K_index, "index"}, {&K_delta, "delta"}, {&K_content, "content"}, {&K_type, "type"}, {&K_text, "text"},
        {&V_content_block_delta, "content_block_delta"}, {&V_text_delta, "text_delta"}};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        if ((*keys[i].slot = PyUnicode_InternFromString(keys[i].s)) == NULL) return -1;
    return 0;
}

/* ------------------------------------------------------------------------------------------- module */

static PyMethodDef mod_methods[] = {
    {"keepalives", (PyCFunction)(void (*)(void))mod_keepalives, METH_FASTCALL, NULL},
    {"chat_text", (PyCFunction)(void (*)(void))chat_text, METH_FASTCALL, NULL},
    {"messages_text", (PyCFunction)messages_text, METH_O, NULL},
    {NULL}};

static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_cext", NULL, -1, mod_methods};

PyMODINIT_FUNC PyInit__cext(void) {
    if (intern_keys() < 0) return NULL;
    PyTypeObject *types[] = {&AcctType, &ObserveType, &ReaderType, &ObserveAsyncType, &StepType};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (PyType_Ready(types[i]) < 0) return NULL;
    PyObject *m = PyModule_Create(&mod);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Acct", (PyObject *)&AcctType) < 0 ||
        PyModule_AddObjectRef(m, "Observe", (PyObject *)&ObserveType) < 0 ||
        PyModule_AddObjectRef(m, "Reader", (PyObject *)&ReaderType) < 0 ||
        PyModule_AddObjectRef(m, "ObserveAsync", (PyObject *)&ObserveAsyncType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
