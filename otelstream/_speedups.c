/* otelstream's optional accelerator: the per-event path of a sync SDK stream, compiled.
 *
 * Reader   the sync body reader (``body_readers.read_sync``): the chunks passed on, the SSE comment lines
 *          (keepalives) counted by memchr, the body's end and a read that raised recorded.
 * Observe  the sync observing iterator around an SDK's ``__stream__`` generator: the same steps as
 *          ``otelstream.adapters.observing.observe_sync`` (the reference), pull by pull: ``Call.state`` stores, the
 *          clock reads, the tracker's flat path for a plain delta, ``stream_ended`` once; ``close``, ``throw`` and
 *          finalisation behave as the generator's do.
 *
 * The flat path here only ever takes what it can decide from exact builtin types (dict, list, str, int) without
 * side effects; anything else is handed, untouched, to the tracker's own Python ``event`` (the general path and
 * the protocol rules stay Python). The tracker's and the call's slots are read and written through their member
 * descriptors' offsets, found per class at the first stream and checked to be plain object slots. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>
#include <time.h>

#ifndef Py_T_OBJECT_EX
#define Py_T_OBJECT_EX T_OBJECT_EX
#endif

#define N_BOUNDS 17
#define N_BUCKETS (N_BOUNDS + 1)

/* set once by configure() */
static long long bounds[N_BOUNDS];
static int configured = 0;
static PyObject *g_report;       /* _guard.report(where, exc) */
static PyObject *g_where;        /* "adapters.event" */
static PyObject *g_stream_ended; /* observing.stream_ended(call, exc, classify) */
static PyObject *g_pulling, *g_between, *g_finished;
static PyObject *g_monotonic; /* time.monotonic_ns: read natively where it reads the same clock */

static PyObject *s_type, *s_delta, *s_text, *s_content, *s_choices, *s_usage, *s_error, *s_finish_reason, *s_index,
    *s_sequence_number, *s_content_block_delta, *s_text_delta, *s_event, *s_first_pull, *s_long_wait, *s_flat_at,
    *s_tracker, *s_clock;

/* ------------------------------------------------------------------------------------ slots by offset */

enum { T_CLOCK, T_FRAME, T_SDK, T_FAST, T_SEQ_NEXT, T_FAST_DELTAS, T_LAST_CHOICE, T_PULL, T_WAIT, T_ALARM, T_PREV,
       T_COUNTS, T_N };
static const char *tracker_slots[T_N] = {"clock", "t_frame", "sdk_ns", "_fast", "seq_next", "_fast_deltas",
                                         "last_choice", "t_pull", "wait_ns", "_wait_alarm", "t_prev_delta",
                                         "_chunk_counts"};
enum { C_STATE, C_SSE, C_N };
static const char *call_slots[C_N] = {"state", "sse"};

typedef struct {
    PyTypeObject *type; /* strong */
    int ok;
    Py_ssize_t off[T_N];
} Layout;

static Layout tracker_layout, call_layout;

static int find_layout(Layout *lay, PyTypeObject *tp, const char **names, int n) {
    if (lay->type == tp) return lay->ok;
    Py_XDECREF(lay->type);
    Py_INCREF(tp);
    lay->type = tp;
    lay->ok = 0;
    for (int i = 0; i < n; i++) {
        PyObject *name = PyUnicode_InternFromString(names[i]);
        if (name == NULL) return -1;
        PyObject *d = _PyType_Lookup(tp, name); /* borrowed */
        Py_DECREF(name);
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)) return 0;
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type != Py_T_OBJECT_EX || (m->flags & READONLY)) return 0;
        lay->off[i] = m->offset;
    }
    lay->ok = 1;
    return 1;
}

#define SLOT(obj, lay, i) (*(PyObject **)((char *)(obj) + (lay).off[i]))

static inline void slot_set(PyObject *obj, Py_ssize_t off, PyObject *v) { /* v: a new reference, stolen */
    PyObject **p = (PyObject **)((char *)obj + off);
    PyObject *old = *p;
    *p = v;
    Py_XDECREF(old);
}

static inline void slot_set_borrowed(PyObject *obj, Py_ssize_t off, PyObject *v) {
    Py_INCREF(v);
    slot_set(obj, off, v);
}

/* an exact int that fits in 64 bits */
static inline int as_ll(PyObject *v, long long *out) {
    if (v == NULL || !PyLong_CheckExact(v)) return 0;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) return 0;
    *out = x;
    return 1;
}

/* an object's own __dict__ when it is a plain dict found at the type's dict offset (an SDK model's fields) */
static inline PyObject *fields_of(PyObject *obj) { /* borrowed: the object keeps its dict */
    Py_ssize_t off = Py_TYPE(obj)->tp_dictoffset;
    if (off > 0) {
        PyObject *d = *(PyObject **)((char *)obj + off);
        return (d != NULL && PyDict_CheckExact(d)) ? d : NULL;
    }
    if (off == 0) return NULL;
    /* a dict the interpreter manages (3.11+): made on its first read, as reading ``__dict__`` makes it */
    PyObject *d = PyObject_GenericGetDict(obj, NULL);
    if (d == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(d);
    return PyDict_CheckExact(d) ? d : NULL;
}

static inline PyObject *get(PyObject *d, PyObject *key) { /* borrowed; NULL: absent (never an error: str keys) */
    return d == NULL ? NULL : PyDict_GetItemWithError(d, key);
}

static inline int str_is(PyObject *v, PyObject *expected) {
    return v != NULL && PyUnicode_CheckExact(v) && (v == expected || PyUnicode_Compare(v, expected) == 0);
}

/* the time-per-chunk bucket of a gap: bisect_left over the le-inclusive bounds (the tracker's placement) */
static inline int bucket_of(long long gap) {
    int i = 0;
    while (i < N_BOUNDS && gap > bounds[i]) i++;
    return i;
}

/* ------------------------------------------------------------------------------------------ clock */

static inline PyObject *read_clock(PyObject *clock) {
#ifdef __linux__
    if (clock == g_monotonic) { /* CPython's monotonic_ns reads CLOCK_MONOTONIC here: one time base */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return PyLong_FromLongLong((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    }
#endif
    return PyObject_CallNoArgs(clock);
}

/* ------------------------------------------------------------------------------------------ Observe */

typedef struct {
    PyObject_HEAD
    PyObject *gen, *call, *classify, *tracker, *clock;
    char started, running, finished, flat;
} Observe;

static PyTypeObject ObserveType;

/* The flat path of StreamTracker.event for an SDK model: 1 taken, 0 not this event's path (nothing touched: the
 * caller hands it to the tracker's own event), -1 an error raised where the tracker's event would raise it. */
static int flat_event(Observe *o, PyObject *ev) {
    PyObject *t = o->tracker;
    long long fast;
    if (!as_ll(SLOT(t, tracker_layout, T_FAST), &fast) || fast < 1 || fast > 4) return 0;
    PyObject *d = fields_of(ev);
    if (d == NULL) return 0;
    PyObject *text = NULL, *seq = NULL;
    long long seqv = 0;
    if (fast == 2) { /* messages */
        if (!str_is(get(d, s_type), s_content_block_delta)) return 0;
        PyObject *delta = get(d, s_delta);
        PyObject *dd = delta == NULL ? NULL : fields_of(delta);
        if (dd == NULL || !str_is(get(dd, s_type), s_text_delta)) return 0;
        text = get(dd, s_text);
    } else if (fast == 1) { /* responses */
        seq = get(d, s_sequence_number);
        PyObject *next = SLOT(t, tracker_layout, T_SEQ_NEXT);
        long long nextv;
        if (!as_ll(seq, &seqv) || !as_ll(next, &nextv) || seqv != nextv || seqv == LLONG_MAX) return 0;
        PyObject *typ = get(d, s_type), *fd = SLOT(t, tracker_layout, T_FAST_DELTAS);
        if (typ == NULL || !PyUnicode_CheckExact(typ) || fd == NULL || !PyFrozenSet_CheckExact(fd)) return 0;
        int in = PySet_Contains(fd, typ);
        if (in <= 0) return in;
        text = get(d, s_delta);
    } else { /* chat (3), completions (4) */
        PyObject *choices = get(d, s_choices);
        if (choices == NULL || !PyList_CheckExact(choices) || PyList_GET_SIZE(choices) != 1) return 0;
        PyObject *c = fields_of(PyList_GET_ITEM(choices, 0));
        if (c == NULL || get(d, s_usage) != Py_None || PyDict_Contains(d, s_error) != 0) return 0;
        if (get(c, s_finish_reason) != Py_None) return 0;
        long long idx, last;
        if (!as_ll(get(c, s_index), &idx) || !as_ll(SLOT(t, tracker_layout, T_LAST_CHOICE), &last) || idx != last)
            return 0;
        if (fast == 3) {
            PyObject *delta = get(c, s_delta);
            text = get(delta == NULL ? NULL : fields_of(delta), s_content);
        } else {
            text = get(c, s_text);
        }
    }
    if (text == NULL || !PyUnicode_CheckExact(text) || PyUnicode_GET_LENGTH(text) == 0) return 0;

    /* the accounting's state, all plain 64-bit ints, or the tracker's own event takes it */
    long long tf, sdk, tp, wn, alarm, prev;
    PyObject *counts = SLOT(t, tracker_layout, T_COUNTS);
    if (!as_ll(SLOT(t, tracker_layout, T_FRAME), &tf) || !as_ll(SLOT(t, tracker_layout, T_SDK), &sdk) ||
        !as_ll(SLOT(t, tracker_layout, T_PULL), &tp) || !as_ll(SLOT(t, tracker_layout, T_WAIT), &wn) ||
        !as_ll(SLOT(t, tracker_layout, T_ALARM), &alarm) || !as_ll(SLOT(t, tracker_layout, T_PREV), &prev) ||
        counts == NULL || !PyList_CheckExact(counts) || PyList_GET_SIZE(counts) != N_BUCKETS)
        return 0;

    PyObject *nowobj = read_clock(o->clock);
    if (nowobj == NULL) return -1;
    long long now, frame, nsdk = sdk, wait = 0, nwn = wn, gap, cnt;
    int i = 0, ok = as_ll(nowobj, &now);
    if (ok) {
        frame = now;
        if (tf) {
            frame = tf;
            ok = !__builtin_sub_overflow(now, tf, &nsdk) && !__builtin_add_overflow(sdk, nsdk, &nsdk);
        }
        if (ok && tp) ok = !__builtin_sub_overflow(frame, tp, &wait) && !__builtin_add_overflow(wn, wait, &nwn);
        if (ok) ok = !__builtin_sub_overflow(now, prev, &gap);
        if (ok) {
            i = bucket_of(gap);
            ok = as_ll(PyList_GET_ITEM(counts, i), &cnt) && cnt < LLONG_MAX;
        }
    }
    if (!ok) { /* beyond 64 bits (only an injected clock): the tracker's own arithmetic, as exact */
        PyObject *r = PyObject_CallMethodObjArgs(t, s_flat_at, nowobj, seq == NULL ? Py_None : seq, NULL);
        Py_DECREF(nowobj);
        if (r == NULL) return -1;
        Py_DECREF(r);
        return 1;
    }
    /* the writes, in the tracker's order */
    if (tf) {
        slot_set(t, tracker_layout.off[T_FRAME], PyLong_FromLong(0));
        PyObject *v = PyLong_FromLongLong(nsdk);
        if (v == NULL) goto fail;
        slot_set(t, tracker_layout.off[T_SDK], v);
    }
    if (seq != NULL) {
        PyObject *v = PyLong_FromLongLong(seqv + 1);
        if (v == NULL) goto fail;
        slot_set(t, tracker_layout.off[T_SEQ_NEXT], v);
    }
    if (tp) {
        slot_set(t, tracker_layout.off[T_PULL], PyLong_FromLong(0));
        PyObject *v = PyLong_FromLongLong(nwn);
        if (v == NULL) goto fail;
        slot_set(t, tracker_layout.off[T_WAIT], v);
        if (wait > alarm) { /* a new longest wait, or a stall: rare, the tracker's own method */
            PyObject *a = PyLong_FromLongLong(tp), *b = PyLong_FromLongLong(wait), *r = NULL;
            if (a != NULL && b != NULL) r = PyObject_CallMethodObjArgs(t, s_long_wait, a, b, NULL);
            Py_XDECREF(a);
            Py_XDECREF(b);
            if (r == NULL) goto fail;
            Py_DECREF(r);
            counts = SLOT(t, tracker_layout, T_COUNTS); /* re-read: the method ran Python code */
            if (!as_ll(SLOT(t, tracker_layout, T_PREV), &prev) || counts == NULL || !PyList_CheckExact(counts) ||
                PyList_GET_SIZE(counts) != N_BUCKETS || __builtin_sub_overflow(now, prev, &gap)) {
                PyErr_SetString(PyExc_RuntimeError, "otelstream accelerator: tracker state changed under a wait");
                goto fail;
            }
            i = bucket_of(gap);
            if (!as_ll(PyList_GET_ITEM(counts, i), &cnt) || cnt == LLONG_MAX) {
                PyErr_SetString(PyExc_RuntimeError, "otelstream accelerator: bucket count out of range");
                goto fail;
            }
        }
    }
    slot_set(t, tracker_layout.off[T_PREV], nowobj); /* steals */
    PyObject *v = PyLong_FromLongLong(cnt + 1);
    if (v == NULL) return -1;
    PyList_SetItem(counts, i, v); /* steals; releases the old count */
    return 1;
fail:
    Py_DECREF(nowobj);
    return -1;
}

static int observe_new_state(Observe *o) { /* the generator's first statements: tracker = call.tracker, ... */
    PyObject *tracker = PyObject_GetAttr(o->call, s_tracker);
    if (tracker == NULL) return -1;
    PyObject *clock = PyObject_GetAttr(tracker, s_clock);
    if (clock == NULL) {
        Py_DECREF(tracker);
        return -1;
    }
    o->tracker = tracker;
    o->clock = clock;
    int a = find_layout(&tracker_layout, Py_TYPE(tracker), tracker_slots, T_N);
    if (a < 0) return -1;
    int b = find_layout(&call_layout, Py_TYPE(o->call), call_slots, C_N);
    if (b < 0) return -1;
    o->flat = a && b;
    return 0;
}

static void set_state(Observe *o, PyObject *state) {
    if (o->flat) {
        slot_set_borrowed(o->call, call_layout.off[C_STATE], state);
    } else if (PyObject_SetAttrString(o->call, "state", state) < 0) {
        PyErr_Clear(); /* not a Call of ours: the reference's store would raise; never seen */
    }
}

static void observe_release(Observe *o) {
    o->finished = 1;
    Py_CLEAR(o->tracker);
    Py_CLEAR(o->clock);
    Py_CLEAR(o->classify);
    Py_CLEAR(o->call);
    Py_CLEAR(o->gen); /* the SDK's generator may finalise now (its finally closes the body) */
}

/* the raised exception, normalised, its traceback attached (a new reference; NULL: none), the error cleared */
static PyObject *fetch_exc(void) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    if (t == NULL) return NULL;
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb != NULL) PyException_SetTraceback(v, tb);
    Py_XDECREF(t);
    Py_XDECREF(tb);
    return v;
}

static void raise_exc(PyObject *v) { /* steals v */
    PyErr_Restore(Py_NewRef((PyObject *)Py_TYPE(v)), v, PyException_GetTraceback(v));
}

/* an exception raised while ``exc`` was being handled: chained to it, as Python chains it */
static void chain_to(PyObject *exc) { /* steals exc */
    PyObject *now = fetch_exc();
    if (now != NULL && now != exc) PyException_SetContext(now, Py_NewRef(exc));
    Py_DECREF(exc);
    if (now != NULL) raise_exc(now);
}

/* The stream ended: with ``exc`` (stolen; NULL: the SDK's generator ran out). stream_ended runs once, then
 * everything is released; returns NULL with ``exc`` raised again (or what stream_ended raised, chained to it). */
static PyObject *observe_end(Observe *o, PyObject *exc) {
    set_state(o, g_finished);
    PyObject *r = PyObject_CallFunctionObjArgs(g_stream_ended, o->call, exc == NULL ? Py_None : exc, o->classify,
                                               NULL);
    observe_release(o);
    if (r == NULL) {
        if (exc != NULL) chain_to(exc);
        return NULL;
    }
    Py_DECREF(r);
    if (exc != NULL) raise_exc(exc);
    return NULL;
}

static PyObject *observe_next(Observe *o) {
    if (o->finished) return NULL;
    if (o->running) {
        PyErr_SetString(PyExc_ValueError, "generator already executing");
        return NULL;
    }
    o->running = 1;
    PyObject *item = NULL, *now;
    if (!o->started) {
        o->started = 1;
        if (observe_new_state(o) < 0) { /* before the generator's try: raised as is */
            observe_release(o);
            o->running = 0;
            return NULL;
        }
        set_state(o, g_pulling);
        if ((now = read_clock(o->clock)) == NULL) goto end;
        PyObject *r = PyObject_CallMethodObjArgs(o->tracker, s_first_pull, now, NULL);
        Py_DECREF(now);
        if (r == NULL) goto end;
        Py_DECREF(r);
        PyObject *it = PyObject_GetIter(o->gen);
        if (it == NULL) goto end;
        Py_SETREF(o->gen, it);
    } else {
        set_state(o, g_pulling);
        if ((now = read_clock(o->clock)) == NULL) goto end;
        if (o->flat) {
            slot_set(o->tracker, tracker_layout.off[T_PULL], now);
        } else {
            int rc = PyObject_SetAttrString(o->tracker, "t_pull", now);
            Py_DECREF(now);
            if (rc < 0) goto end;
        }
    }
    item = Py_TYPE(o->gen)->tp_iternext(o->gen);
    if (item == NULL) {
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_StopIteration)) goto end;
            PyErr_Clear();
        }
        observe_end(o, NULL);
        o->running = 0;
        return NULL;
    }
    set_state(o, g_between);
    int rc = o->flat ? flat_event(o, item) : 0;
    if (rc == 0) {
        PyObject *sse = o->flat ? SLOT(o->call, call_layout, C_SSE) : NULL;
        if (sse != NULL) Py_INCREF(sse);
        else if (o->flat) PyErr_SetString(PyExc_AttributeError, "sse");
        else sse = PyObject_GetAttrString(o->call, "sse");
        PyObject *r = NULL;
        if (sse != NULL) {
            PyObject *args[5] = {NULL, o->tracker, item, Py_None, sse};
            r = PyObject_VectorcallMethod(s_event, args + 1, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
            Py_DECREF(sse);
        }
        rc = r == NULL ? -1 : 1;
        Py_XDECREF(r);
    }
    if (rc < 0) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) goto end;
        PyObject *exc = fetch_exc(); /* our bug: never changes what the caller gets (re-raised in strict mode) */
        PyObject *r = PyObject_CallFunctionObjArgs(g_report, g_where, exc, NULL);
        if (r == NULL) {
            chain_to(exc);
            goto end;
        }
        Py_DECREF(r);
        Py_DECREF(exc);
    }
    o->running = 0;
    return item;
end:
    Py_XDECREF(item);
    observe_end(o, fetch_exc());
    o->running = 0;
    return NULL;
}

static PyObject *observe_send(Observe *o, PyObject *value) {
    if (value != Py_None && !o->started && !o->finished) {
        PyErr_SetString(PyExc_TypeError, "can't send non-None value to a just-started generator");
        return NULL;
    }
    PyObject *item = observe_next(o);
    if (item == NULL && !PyErr_Occurred()) PyErr_SetNone(PyExc_StopIteration);
    return item;
}

static PyObject *observe_close(Observe *o, PyObject *Py_UNUSED(ignored)) {
    if (o->running) {
        PyErr_SetString(PyExc_ValueError, "generator already executing");
        return NULL;
    }
    if (o->finished) Py_RETURN_NONE;
    if (!o->started) {
        observe_release(o);
        Py_RETURN_NONE;
    }
    o->running = 1;
    PyObject *exit = PyObject_CallNoArgs(PyExc_GeneratorExit);
    if (exit == NULL) {
        o->running = 0;
        return NULL;
    }
    observe_end(o, exit);
    o->running = 0;
    if (PyErr_ExceptionMatches(PyExc_GeneratorExit) || PyErr_ExceptionMatches(PyExc_StopIteration)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return NULL;
}

static PyObject *observe_throw(Observe *o, PyObject *args) {
    PyObject *typ, *val = Py_None, *tb = Py_None;
    if (!PyArg_UnpackTuple(args, "throw", 1, 3, &typ, &val, &tb)) return NULL;
    if (o->running) {
        PyErr_SetString(PyExc_ValueError, "generator already executing");
        return NULL;
    }
    if (tb != Py_None && !PyTraceBack_Check(tb)) {
        PyErr_SetString(PyExc_TypeError, "throw() third argument must be a traceback object");
        return NULL;
    }
    if (PyExceptionClass_Check(typ)) {
        PyErr_SetObject(typ, val);
    } else if (PyExceptionInstance_Check(typ)) {
        if (val != Py_None) {
            PyErr_SetString(PyExc_TypeError, "instance exception may not have a separate value");
            return NULL;
        }
        PyErr_SetObject((PyObject *)Py_TYPE(typ), typ);
    } else {
        PyErr_Format(PyExc_TypeError, "exceptions must be classes or instances deriving from BaseException, not %s",
                     Py_TYPE(typ)->tp_name);
        return NULL;
    }
    PyObject *exc = fetch_exc();
    if (exc == NULL) return NULL;
    if (tb != Py_None) PyException_SetTraceback(exc, tb);
    if (o->finished || !o->started) { /* raised where the generator stands: nothing of ours runs */
        if (!o->finished) observe_release(o);
        raise_exc(exc);
        return NULL;
    }
    o->running = 1;
    observe_end(o, exc);
    o->running = 0;
    return NULL;
}

static void observe_finalize(PyObject *self) {
    Observe *o = (Observe *)self;
    if (!o->started || o->finished || o->running) return;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyObject *r = observe_close(o, NULL);
    if (r == NULL) PyErr_WriteUnraisable(self);
    else Py_DECREF(r);
    PyErr_Restore(t, v, tb);
}

static int observe_traverse(Observe *o, visitproc visit, void *arg) {
    Py_VISIT(o->gen);
    Py_VISIT(o->call);
    Py_VISIT(o->classify);
    Py_VISIT(o->tracker);
    Py_VISIT(o->clock);
    return 0;
}

static int observe_clear(Observe *o) {
    Py_CLEAR(o->tracker);
    Py_CLEAR(o->clock);
    Py_CLEAR(o->classify);
    Py_CLEAR(o->call);
    Py_CLEAR(o->gen);
    return 0;
}

static void observe_dealloc(Observe *o) {
    if (PyObject_CallFinalizerFromDealloc((PyObject *)o) < 0) return; /* resurrected */
    PyObject_GC_UnTrack(o);
    observe_clear(o);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static PyObject *observe_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *gen, *call, *classify;
    if (kw != NULL && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Observe takes positional arguments only");
        return NULL;
    }
    if (!configured) {
        PyErr_SetString(PyExc_RuntimeError, "otelstream._speedups is not configured");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "Observe", 3, 3, &gen, &call, &classify)) return NULL;
    Observe *o = (Observe *)type->tp_alloc(type, 0);
    if (o == NULL) return NULL;
    o->gen = Py_NewRef(gen);
    o->call = Py_NewRef(call);
    o->classify = Py_NewRef(classify);
    return (PyObject *)o;
}

static PyObject *observe_running(Observe *o, void *Py_UNUSED(c)) { return PyBool_FromLong(o->running); }

static PyMethodDef observe_methods[] = {
    {"send", (PyCFunction)observe_send, METH_O, "as a generator's send: the value is not used"},
    {"throw", (PyCFunction)observe_throw, METH_VARARGS, "as a generator's throw"},
    {"close", (PyCFunction)observe_close, METH_NOARGS, "as a generator's close"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef observe_getset[] = {
    {"gi_running", (getter)observe_running, NULL, "a pull is running", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ObserveType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "otelstream._speedups.Observe",
    .tp_basicsize = sizeof(Observe),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The sync observing iterator around an SDK's __stream__ generator (observing.observe_sync, compiled).",
    .tp_new = observe_new,
    .tp_dealloc = (destructor)observe_dealloc,
    .tp_traverse = (traverseproc)observe_traverse,
    .tp_clear = (inquiry)observe_clear,
    .tp_finalize = observe_finalize,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)observe_next,
    .tp_methods = observe_methods,
    .tp_getset = observe_getset,
};

/* ------------------------------------------------------------------------------------------ Reader */

/* the body reader (body_readers.read_sync): chunks passed on unchanged, SSE comment lines counted in plain bodies,
 * the body's end and a read that raised recorded */
static PyObject *r_report, *r_where, *r_raised, *r_ended, *r_scan; /* r_scan: the reference's count, other types */
static int reader_configured = 0;
static PyObject *s_keepalive;

typedef struct {
    PyObject_HEAD
    PyObject *body, *call, *tracker;
    char plain, line_start, started, running, finished;
} Reader;

static PyTypeObject ReaderType;

static void reader_release(Reader *r) {
    r->finished = 1;
    Py_CLEAR(r->tracker);
    Py_CLEAR(r->call);
    Py_CLEAR(r->body);
}

/* comment lines in one bytes chunk: after LF, after a CR (searched only when the chunk holds one), and at its
 * start when the last chunk ended a line */
static Py_ssize_t count_comments(const char *p, Py_ssize_t n, int line_start) {
    Py_ssize_t found = 0;
    const char *end = p + n - 1, *q = p;
    while (q < end && (q = memchr(q, '\n', (size_t)(end - q))) != NULL) {
        if (q[1] == ':') found++;
        q++;
    }
    if (memchr(p, '\r', (size_t)n) != NULL) {
        q = p;
        while (q < end && (q = memchr(q, '\r', (size_t)(end - q))) != NULL) {
            if (q[1] == ':') found++;
            q++;
        }
    }
    if (line_start && p[0] == ':') found++;
    return found;
}

/* the count of one chunk: 0 done, -1 an exception (the reference's try: reported) */
static int reader_count(Reader *r, PyObject *chunk) {
    if (PyBytes_CheckExact(chunk)) {
        Py_ssize_t n = PyBytes_GET_SIZE(chunk);
        if (n == 0) return 0;
        const char *p = PyBytes_AS_STRING(chunk);
        Py_ssize_t found = count_comments(p, n, r->line_start);
        if (found) {
            PyObject *clock = PyObject_GetAttr(r->tracker, s_clock);
            if (clock == NULL) return -1;
            PyObject *now = read_clock(clock);
            Py_DECREF(clock);
            if (now == NULL) return -1;
            PyObject *cnt = PyLong_FromSsize_t(found), *res = NULL;
            if (cnt != NULL) res = PyObject_CallMethodObjArgs(r->tracker, s_keepalive, cnt, now, NULL);
            Py_XDECREF(cnt);
            Py_DECREF(now);
            if (res == NULL) return -1;
            Py_DECREF(res);
        }
        r->line_start = p[n - 1] == '\n' || p[n - 1] == '\r';
        return 0;
    }
    int truth = PyObject_IsTrue(chunk);
    if (truth <= 0) return truth;
    /* another bytes-like type: the reference's own statements (observing nothing else) */
    PyObject *res = PyObject_CallFunction(r_scan, "OOi", r->tracker, chunk, (int)r->line_start);
    if (res == NULL) return -1;
    int ls = PyObject_IsTrue(res);
    Py_DECREF(res);
    if (ls < 0) return -1;
    r->line_start = (char)ls;
    return 0;
}

static PyObject *reader_fail(Reader *r) { /* a read raised: recorded (unless GeneratorExit), raised again */
    PyObject *exc = fetch_exc();
    if (PyErr_GivenExceptionMatches(exc, PyExc_GeneratorExit)) {
        reader_release(r);
        raise_exc(exc);
        return NULL;
    }
    PyObject *res = PyObject_CallFunctionObjArgs(r_raised, r->call, NULL);
    reader_release(r);
    if (res == NULL) {
        chain_to(exc);
        return NULL;
    }
    Py_DECREF(res);
    raise_exc(exc);
    return NULL;
}

static PyObject *reader_next(Reader *r) {
    if (r->finished) return NULL;
    if (r->running) {
        PyErr_SetString(PyExc_ValueError, "generator already executing");
        return NULL;
    }
    r->running = 1;
    PyObject *res;
    if (!r->started) {
        r->started = 1;
        PyObject *tracker = PyObject_GetAttr(r->call, s_tracker);
        if (tracker == NULL) {
            reader_release(r);
            r->running = 0;
            return NULL;
        }
        r->tracker = tracker;
        PyObject *it = PyObject_GetIter(r->body);
        if (it == NULL) goto fail;
        Py_SETREF(r->body, it);
    }
    PyObject *chunk = Py_TYPE(r->body)->tp_iternext(r->body);
    if (chunk == NULL) {
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_StopIteration)) goto fail;
            PyErr_Clear();
        }
        res = PyObject_CallFunctionObjArgs(r_ended, r->call, NULL);
        reader_release(r);
        r->running = 0;
        Py_XDECREF(res);
        return NULL;
    }
    if (r->plain && reader_count(r, chunk) < 0) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) {
            Py_DECREF(chunk);
            goto fail;
        }
        PyObject *exc = fetch_exc(); /* our bug: never changes what the caller reads (re-raised in strict mode) */
        res = PyObject_CallFunctionObjArgs(r_report, r_where, exc, NULL);
        if (res == NULL) {
            chain_to(exc);
            Py_DECREF(chunk);
            goto fail;
        }
        Py_DECREF(res);
        Py_DECREF(exc);
    }
    r->running = 0;
    return chunk;
fail:
    res = reader_fail(r);
    r->running = 0;
    return res;
}

static PyObject *reader_close(Reader *r, PyObject *Py_UNUSED(ignored)) {
    if (r->running) {
        PyErr_SetString(PyExc_ValueError, "generator already executing");
        return NULL;
    }
    reader_release(r); /* GeneratorExit at the yield: raised again, nothing recorded (not a read) */
    Py_RETURN_NONE;
}

static PyObject *reader_throw(Reader *r, PyObject *args) {
    PyObject *typ, *val = Py_None, *tb = Py_None;
    if (!PyArg_UnpackTuple(args, "throw", 1, 3, &typ, &val, &tb)) return NULL;
    if (r->running) {
        PyErr_SetString(PyExc_ValueError, "generator already executing");
        return NULL;
    }
    if (PyExceptionClass_Check(typ)) {
        PyErr_SetObject(typ, val);
    } else if (PyExceptionInstance_Check(typ) && val == Py_None) {
        PyErr_SetObject((PyObject *)Py_TYPE(typ), typ);
    } else {
        PyErr_SetString(PyExc_TypeError, "throw(): an exception class or instance is needed");
        return NULL;
    }
    if (tb != Py_None && PyTraceBack_Check(tb)) {
        PyObject *exc = fetch_exc();
        PyException_SetTraceback(exc, tb);
        raise_exc(exc);
    }
    if (r->finished || !r->started || PyErr_ExceptionMatches(PyExc_GeneratorExit)) {
        PyObject *exc = fetch_exc();
        reader_release(r);
        raise_exc(exc);
        return NULL;
    }
    r->running = 1;
    PyObject *res = reader_fail(r);
    r->running = 0;
    return res;
}

static PyObject *reader_send(Reader *r, PyObject *value) {
    if (value != Py_None && !r->started && !r->finished) {
        PyErr_SetString(PyExc_TypeError, "can't send non-None value to a just-started generator");
        return NULL;
    }
    PyObject *chunk = reader_next(r);
    if (chunk == NULL && !PyErr_Occurred()) PyErr_SetNone(PyExc_StopIteration);
    return chunk;
}

static int reader_traverse(Reader *r, visitproc visit, void *arg) {
    Py_VISIT(r->body);
    Py_VISIT(r->call);
    Py_VISIT(r->tracker);
    return 0;
}

static int reader_clear(Reader *r) {
    Py_CLEAR(r->tracker);
    Py_CLEAR(r->call);
    Py_CLEAR(r->body);
    return 0;
}

static void reader_dealloc(Reader *r) { /* a close at finalisation records nothing: releasing is all it does */
    PyObject_GC_UnTrack(r);
    reader_clear(r);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *reader_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    PyObject *body, *call;
    int plain;
    if (kw != NULL && PyDict_GET_SIZE(kw)) {
        PyErr_SetString(PyExc_TypeError, "Reader takes positional arguments only");
        return NULL;
    }
    if (!reader_configured) {
        PyErr_SetString(PyExc_RuntimeError, "otelstream._speedups' reader is not configured");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOp", &body, &call, &plain)) return NULL;
    Reader *r = (Reader *)type->tp_alloc(type, 0);
    if (r == NULL) return NULL;
    r->body = Py_NewRef(body);
    r->call = Py_NewRef(call);
    r->plain = (char)plain;
    r->line_start = 1;
    return (PyObject *)r;
}

static PyMethodDef reader_methods[] = {
    {"send", (PyCFunction)reader_send, METH_O, "as a generator's send: the value is not used"},
    {"throw", (PyCFunction)reader_throw, METH_VARARGS, "as a generator's throw"},
    {"close", (PyCFunction)reader_close, METH_NOARGS, "as a generator's close"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "otelstream._speedups.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The sync body reader with its keepalive count (body_readers.read_sync, compiled).",
    .tp_new = reader_new,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_traverse = (traverseproc)reader_traverse,
    .tp_clear = (inquiry)reader_clear,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)reader_next,
    .tp_methods = reader_methods,
};

static PyObject *configure_reader(PyObject *self, PyObject *args) {
    PyObject *report, *where, *raised, *ended, *scan;
    if (!PyArg_UnpackTuple(args, "configure_reader", 5, 5, &report, &where, &raised, &ended, &scan)) return NULL;
    Py_XSETREF(r_report, Py_NewRef(report));
    Py_XSETREF(r_where, Py_NewRef(where));
    Py_XSETREF(r_raised, Py_NewRef(raised));
    Py_XSETREF(r_ended, Py_NewRef(ended));
    Py_XSETREF(r_scan, Py_NewRef(scan));
    reader_configured = 1;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------ module */

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *report, *where, *ended, *pulling, *between, *finished, *monotonic, *bnds;
    if (!PyArg_UnpackTuple(args, "configure", 8, 8, &report, &where, &ended, &pulling, &between, &finished,
                           &monotonic, &bnds))
        return NULL;
    if (!PyTuple_Check(bnds) || PyTuple_GET_SIZE(bnds) != N_BOUNDS) {
        PyErr_SetString(PyExc_ValueError, "configure: the 17 time-per-chunk bounds (ns) are needed");
        return NULL;
    }
    for (int i = 0; i < N_BOUNDS; i++) {
        if (!as_ll(PyTuple_GET_ITEM(bnds, i), &bounds[i])) {
            PyErr_SetString(PyExc_ValueError, "configure: a bound is not a 64-bit int");
            return NULL;
        }
    }
    Py_XSETREF(g_report, Py_NewRef(report));
    Py_XSETREF(g_where, Py_NewRef(where));
    Py_XSETREF(g_stream_ended, Py_NewRef(ended));
    Py_XSETREF(g_pulling, Py_NewRef(pulling));
    Py_XSETREF(g_between, Py_NewRef(between));
    Py_XSETREF(g_finished, Py_NewRef(finished));
    Py_XSETREF(g_monotonic, Py_NewRef(monotonic));
    configured = 1;
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(report, where, stream_ended, pulling, between, finished, monotonic_ns, bounds): once, at import"},
    {"configure_reader", configure_reader, METH_VARARGS,
     "configure_reader(report, where, body_raised, body_ended, scan): once, at import"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "otelstream._speedups", "otelstream's optional compiled hot path.", -1, module_methods,
};

#define INTERN(var, text)                                                                                              \
    if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL;

PyMODINIT_FUNC PyInit__speedups(void) {
    INTERN(s_type, "type");
    INTERN(s_delta, "delta");
    INTERN(s_text, "text");
    INTERN(s_content, "content");
    INTERN(s_choices, "choices");
    INTERN(s_usage, "usage");
    INTERN(s_error, "error");
    INTERN(s_finish_reason, "finish_reason");
    INTERN(s_index, "index");
    INTERN(s_sequence_number, "sequence_number");
    INTERN(s_content_block_delta, "content_block_delta");
    INTERN(s_text_delta, "text_delta");
    INTERN(s_event, "event");
    INTERN(s_first_pull, "first_pull");
    INTERN(s_long_wait, "_long_wait");
    INTERN(s_flat_at, "_flat_at");
    INTERN(s_tracker, "tracker");
    INTERN(s_clock, "clock");
    INTERN(s_keepalive, "keepalive");
    if (PyType_Ready(&ObserveType) < 0 || PyType_Ready(&ReaderType) < 0) return NULL;
    PyObject *m = PyModule_Create(&speedups_module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Observe", (PyObject *)&ObserveType) < 0 ||
        PyModule_AddObjectRef(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
