#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *count_pairs(PyObject *m, PyObject *arg) {
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "bytes expected");
        return NULL;
    }
    const char *p = PyBytes_AS_STRING(arg), *end = p + PyBytes_GET_SIZE(arg);
    long n = 0;
    for (; p + 1 < end; p++)
        if (p[0] == '\n' && p[1] == ':') n++;
    return PyLong_FromLong(n);
}

static PyMethodDef methods[] = {{"count_pairs", count_pairs, METH_O, NULL}, {NULL}};
static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "_speed", NULL, -1, methods};
PyMODINIT_FUNC PyInit__speed(void) { return PyModule_Create(&mod); }
