/* odradek.protocol._codecs: the compiled codecs of protocol/compiled_codecs.py, run in C.

   decode(program, views, data, pos) reads one struct from the buffer `data` at `pos` and returns
   (struct, end), exactly what the generated Python decoder of the same message version returns
   (compiled_codecs.py:compile_python_decoder), or raises wherever that decoder raises anything.
   It never reads outside `data`.

   encode(program, large_part, obj, head=b'') returns head followed by obj written as the struct,
   exactly what the generated Python encoder returns (compiled_codecs.py:compile_python_encoder;
   with large_part > 0, its parts encoder: RECORDS of at least large_part bytes left apart, as the
   list of parts), or raises wherever that encoder raises, and for a few inputs more that it takes
   (a mapping that is not a dict or a Struct, a number that is not an int where an integer is
   declared, nor a float or an int where a float is).

   Message.decode / encode then leave what raised to the declared construct codec, whose answer
   or error is the canonical one, as they do for the generated Python; so this module can only be
   faster, never different. tests/unit/test_compiled_codecs.py holds it to the declared codecs on
   every version of every declared message, as bytes and as views, as it holds the generated Python.

   `program` is a struct's program, built once per message version by compiled_codecs.py:c_program:

       struct:  (record_class, flexible, fields, names, fresh, wire_defaults, tagged)
                fields: one op per wire field, in wire order;
                names: every field's name, wire ones first, then the absent and tagged ones
                       (the order the decoded struct's keys take);
                fresh: per absent or tagged field, (fresh_default or None, default value);
                wire_defaults: per wire field, what is written when obj lacks it;
                tagged: per tagged field, (name, default): none is written, so a value other
                        than its default raises
       op:      (code, compact, nullable, argument): argument is the element op of an ARRAY, the
                struct program of a STRUCT, (uuid.UUID, the zero UUID) for a UUID, else None.

   Wire formats (big-endian): fixed-width integers, floats and bools; a length is an int16 (a
   STRING), an int32 (BYTES, RECORDS, ARRAY), or in a compact field an unsigned varint of at most 5
   bytes holding length + 1; a null is length -1 where the field is nullable; a flexible struct
   ends with its tagged fields, of which only the empty section (one zero byte) is taken here.
   With `views` true and a memoryview as `data`, RECORDS are views into it; every other field is
   what a bytes input gives. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if PY_VERSION_HEX < 0x030B0000   /* Python 3.10: the float packers before they were public */
#define PyFloat_Pack8(x, p, le) _PyFloat_Pack8((x), (unsigned char *)(p), (le))
#define PyFloat_Unpack8(p, le) _PyFloat_Unpack8((const unsigned char *)(p), (le))
#endif

enum { INT8, INT16, INT32, INT64, BOOL, FLOAT64, UUID, STRING, BYTES, RECORDS, ARRAY, STRUCT };

typedef struct {
    const unsigned char *p;
    Py_ssize_t size;
    Py_ssize_t pos;
    PyObject *view;   /* the memoryview RECORDS are sliced from, or NULL */
} Reader;

static PyObject *empty_tuple;

static PyObject *decline(void) {
    PyErr_SetString(PyExc_ValueError, "not an input the compiled decoder takes");
    return NULL;
}

static int need(Reader *r, Py_ssize_t n) { return n <= r->size - r->pos; }

static uint64_t be(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* A length: compact (uvarint - 1, as primitives.uvarint_at reads it) or int16/int32. -1 on error. */
static int read_length(Reader *r, int compact, int wide, int64_t *out) {
    if (compact) {
        int64_t value = 0;
        for (int shift = 0; shift <= 28; shift += 7) {
            if (r->pos >= r->size)
                return -1;
            unsigned char byte = r->p[r->pos++];
            value |= (int64_t)(byte & 0x7F) << shift;
            if (byte < 0x80) {
                *out = value - 1;
                return 0;
            }
        }
        return -1;   /* longer than 5 bytes */
    }
    int width = wide ? 4 : 2;
    if (!need(r, width))
        return -1;
    uint64_t raw = be(r->p + r->pos, width);
    r->pos += width;
    *out = wide ? (int64_t)(int32_t)raw : (int64_t)(int16_t)raw;
    return 0;
}

static PyObject *read_fixed(Reader *r, long code) {
    static const int widths[] = {1, 2, 4, 8, 1, 8};
    int width = widths[code];
    if (!need(r, width))
        return decline();
    const unsigned char *q = r->p + r->pos;
    r->pos += width;
    switch (code) {
    case INT8: return PyLong_FromLong((int8_t)q[0]);
    case INT16: return PyLong_FromLong((int16_t)be(q, 2));
    case INT32: return PyLong_FromLong((int32_t)be(q, 4));
    case INT64: return PyLong_FromLongLong((int64_t)be(q, 8));
    case BOOL: return PyBool_FromLong(q[0] != 0);
    default: return PyFloat_FromDouble(PyFloat_Unpack8((const char *)q, 0));
    }
}

static PyObject *read_struct(Reader *r, PyObject *program);

static PyObject *read_value(Reader *r, PyObject *op) {
    long code = PyLong_AsLong(PyTuple_GET_ITEM(op, 0));
    if (code <= FLOAT64)
        return read_fixed(r, code);
    PyObject *argument = PyTuple_GET_ITEM(op, 3);
    if (code == STRUCT)
        return read_struct(r, argument);
    if (code == UUID) {
        if (!need(r, 16))
            return decline();
        static const unsigned char zero[16];
        const unsigned char *start = r->p + r->pos;
        r->pos += 16;
        if (memcmp(start, zero, 16) == 0)   /* the null topic id of most requests: one shared UUID */
            return Py_NewRef(PyTuple_GET_ITEM(argument, 1));
        PyObject *raw = PyBytes_FromStringAndSize((const char *)start, 16);
        if (raw == NULL)
            return NULL;
        PyObject *kwargs = Py_BuildValue("{sN}", "bytes", raw);
        if (kwargs == NULL)
            return NULL;
        PyObject *value = PyObject_Call(PyTuple_GET_ITEM(argument, 0), empty_tuple, kwargs);
        Py_DECREF(kwargs);
        return value;
    }
    int compact = PyTuple_GET_ITEM(op, 1) == Py_True;
    int64_t n;
    if (read_length(r, compact, code != STRING, &n) < 0)
        return decline();
    if (n < 0) {
        if (n == -1 && PyTuple_GET_ITEM(op, 2) == Py_True)
            Py_RETURN_NONE;
        return decline();
    }
    if (code == ARRAY) {
        if (n > r->size - r->pos)   /* a lying count: every element takes a byte at least */
            return decline();
        PyObject *list = PyList_New((Py_ssize_t)n);
        if (list == NULL)
            return NULL;
        for (Py_ssize_t i = 0; i < (Py_ssize_t)n; i++) {
            PyObject *item = read_value(r, argument);
            if (item == NULL) {
                Py_DECREF(list);
                return NULL;
            }
            PyList_SET_ITEM(list, i, item);
        }
        return list;
    }
    if (!need(r, (Py_ssize_t)n))
        return decline();
    const char *start = (const char *)r->p + r->pos;
    Py_ssize_t at = r->pos;
    r->pos += (Py_ssize_t)n;
    if (code == STRING)
        return PyUnicode_DecodeUTF8(start, (Py_ssize_t)n, NULL);
    if (code == RECORDS && r->view != NULL)
        return PySequence_GetSlice(r->view, at, at + (Py_ssize_t)n);
    return PyBytes_FromStringAndSize(start, (Py_ssize_t)n);
}

static PyObject *read_struct(Reader *r, PyObject *program) {
    PyObject *fields = PyTuple_GET_ITEM(program, 2);
    PyObject *names = PyTuple_GET_ITEM(program, 3);
    PyObject *defaults = PyTuple_GET_ITEM(program, 4);
    Py_ssize_t wire = PyTuple_GET_SIZE(fields);
    /* the record class is a dict subclass with no __init__: its tp_new makes the empty dict */
    PyTypeObject *record = (PyTypeObject *)PyTuple_GET_ITEM(program, 0);
    PyObject *result = record->tp_new(record, empty_tuple, NULL);
    if (result == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < wire; i++) {
        PyObject *value = read_value(r, PyTuple_GET_ITEM(fields, i));
        if (value == NULL || PyDict_SetItem(result, PyTuple_GET_ITEM(names, i), value) < 0) {
            Py_XDECREF(value);
            Py_DECREF(result);
            return NULL;
        }
        Py_DECREF(value);
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(defaults); i++) {
        PyObject *d = PyTuple_GET_ITEM(defaults, i);
        PyObject *fresh = PyTuple_GET_ITEM(d, 0);
        PyObject *value = fresh == Py_None ? Py_NewRef(PyTuple_GET_ITEM(d, 1)) : PyObject_CallNoArgs(fresh);
        if (value == NULL || PyDict_SetItem(result, PyTuple_GET_ITEM(names, wire + i), value) < 0) {
            Py_XDECREF(value);
            Py_DECREF(result);
            return NULL;
        }
        Py_DECREF(value);
    }
    if (PyTuple_GET_ITEM(program, 1) == Py_True) {   /* an empty tagged-field section only */
        if (r->pos >= r->size || r->p[r->pos] != 0) {
            Py_DECREF(result);
            return decline();
        }
        r->pos++;
    }
    return result;
}

static PyObject *decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyTuple_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "decode(program, views, data, pos)");
        return NULL;
    }
    PyObject *program = args[0], *data = args[2];
    int views = PyObject_IsTrue(args[1]);
    Py_ssize_t pos = PyLong_AsSsize_t(args[3]);
    if (views < 0 || (pos == -1 && PyErr_Occurred()))
        return NULL;
    Py_buffer buffer;
    if (PyObject_GetBuffer(data, &buffer, PyBUF_SIMPLE) < 0)
        return NULL;
    Reader r = {buffer.buf, buffer.len, pos, views && PyMemoryView_Check(data) ? data : NULL};
    PyObject *result = NULL;
    if (pos < 0)   /* (a position past the end is read as the Python reads it: no field fits) */
        decline();
    else
        result = read_struct(&r, program);
    PyBuffer_Release(&buffer);
    if (result == NULL)
        return NULL;
    return Py_BuildValue("Nn", result, r.pos);
}


/* --- encoding ------------------------------------------------------------------------------ */

typedef struct {
    char *p;
    Py_ssize_t len, cap;
    PyObject *parts;          /* the parts so far (a parts encoder that split), or NULL */
    Py_ssize_t large_part;    /* RECORDS this large become a part of their own; 0: never */
} Writer;

static int reserve(Writer *w, Py_ssize_t n) {
    if (n <= w->cap - w->len)
        return 0;
    Py_ssize_t cap = w->cap ? w->cap : 256;
    while (cap - w->len < n) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return -1;
        }
        cap *= 2;
    }
    char *p = PyMem_Realloc(w->p, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    w->p = p;
    w->cap = cap;
    return 0;
}

static int put(Writer *w, const void *data, Py_ssize_t n) {
    if (n == 0)
        return 0;
    if (reserve(w, n) < 0)
        return -1;
    memcpy(w->p + w->len, data, n);
    w->len += n;
    return 0;
}

static int put_be(Writer *w, uint64_t v, int width) {
    unsigned char b[8];
    for (int i = width - 1; i >= 0; i--, v >>= 8)
        b[i] = (unsigned char)v;
    return put(w, b, width);
}

static int refuse(void) {
    PyErr_SetString(PyExc_ValueError, "not a body the compiled encoder takes");
    return -1;
}

/* A length as compact (uvarint of n + 1) or int16/int32. */
static int put_length(Writer *w, Py_ssize_t n, int compact, int wide) {
    if (compact) {
        unsigned char b[10];
        int i = 0;
        uint64_t v = (uint64_t)n + 1;
        while (v >= 0x80) {
            b[i++] = (unsigned char)(v | 0x80);
            v >>= 7;
        }
        b[i++] = (unsigned char)v;
        return put(w, b, i);
    }
    if (n > (wide ? INT32_MAX : INT16_MAX))
        return refuse();
    return put_be(w, (uint64_t)n, wide ? 4 : 2);
}

static int put_fixed(Writer *w, long code, PyObject *v) {
    static const int widths[] = {1, 2, 4, 8};
    if (code == BOOL) {   /* a Flag writes the value's truth, as struct's '?' does */
        int truth = PyObject_IsTrue(v);
        if (truth < 0)
            return -1;
        unsigned char b = (unsigned char)truth;
        return put(w, &b, 1);
    }
    if (code == FLOAT64) {   /* a float, or an int as struct's 'd' takes it */
        if (!PyFloat_CheckExact(v) && !PyLong_Check(v))
            return refuse();
        double x = PyFloat_CheckExact(v) ? PyFloat_AS_DOUBLE(v) : PyLong_AsDouble(v);
        if (x == -1.0 && PyErr_Occurred())
            return -1;
        char b[8];
        if (PyFloat_Pack8(x, b, 0) < 0)
            return -1;
        return put(w, b, 8);
    }
    if (!PyLong_Check(v))   /* an int or a bool, as struct packs them; anything else is refused */
        return refuse();
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred()))
        return refuse();
    int width = widths[code];
    if (width < 8) {
        long long bound = 1LL << (8 * width - 1);
        if (x < -bound || x >= bound)
            return refuse();
    }
    return put_be(w, (uint64_t)x, width);
}

static int put_struct(Writer *w, PyObject *program, PyObject *obj);

static int put_value(Writer *w, PyObject *op, PyObject *v) {
    long code = PyLong_AsLong(PyTuple_GET_ITEM(op, 0));
    if (code <= FLOAT64)
        return put_fixed(w, code, v);
    PyObject *argument = PyTuple_GET_ITEM(op, 3);
    if (code == STRUCT)
        return put_struct(w, argument, v);
    if (code == UUID) {
        if (Py_TYPE(v) != (PyTypeObject *)PyTuple_GET_ITEM(argument, 0))
            return refuse();
        PyObject *raw = PyObject_GetAttrString(v, "bytes");
        if (raw == NULL)
            return -1;
        int ok = PyBytes_Check(raw) && PyBytes_GET_SIZE(raw) == 16 ? put(w, PyBytes_AS_STRING(raw), 16) : refuse();
        Py_DECREF(raw);
        return ok;
    }
    int compact = PyTuple_GET_ITEM(op, 1) == Py_True;
    if (v == Py_None) {
        if (PyTuple_GET_ITEM(op, 2) != Py_True)
            return refuse();
        if (compact)
            return put(w, "\0", 1);
        return put(w, "\xff\xff\xff\xff", code == STRING ? 2 : 4);
    }
    if (code == STRING) {
        if (!PyUnicode_CheckExact(v))
            return refuse();
        Py_ssize_t n;
        const char *utf8 = PyUnicode_AsUTF8AndSize(v, &n);
        if (utf8 == NULL)
            return -1;
        if (n > 0x7FFF)
            return refuse();
        if (put_length(w, n, compact, 0) < 0)
            return -1;
        return put(w, utf8, n);
    }
    if (code == ARRAY) {
        if (!PyList_CheckExact(v) && !PyTuple_CheckExact(v))
            return refuse();
        PyObject *items = PySequence_Fast(v, "");   /* the list or tuple itself */
        if (items == NULL)
            return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
        int ok = put_length(w, n, compact, 1);
        for (Py_ssize_t i = 0; ok == 0 && i < n; i++)
            ok = put_value(w, argument, PySequence_Fast_GET_ITEM(items, i));
        Py_DECREF(items);
        return ok;
    }
    /* BYTES, RECORDS: any C-contiguous buffer, its bytes */
    Py_buffer buffer;
    if (PyObject_GetBuffer(v, &buffer, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        return refuse();
    }
    int ok = put_length(w, buffer.len, compact, 1);
    if (ok == 0 && code == RECORDS && w->large_part > 0 && buffer.len >= w->large_part) {
        /* a part of its own: what is joined so far, then the value itself (bytes as they are,
           any other buffer as memoryview(value).cast('B')) */
        PyObject *before = PyBytes_FromStringAndSize(w->p, w->len);
        PyObject *part;
        if (PyBytes_CheckExact(v)) {
            part = Py_NewRef(v);
        } else {
            PyObject *view = PyMemoryView_FromObject(v);
            part = view == NULL ? NULL : PyObject_CallMethod(view, "cast", "s", "B");
            Py_XDECREF(view);
        }
        if (w->parts == NULL)
            w->parts = PyList_New(0);
        if (before == NULL || part == NULL || w->parts == NULL || PyList_Append(w->parts, before) < 0
                || PyList_Append(w->parts, part) < 0)
            ok = -1;
        Py_XDECREF(before);
        Py_XDECREF(part);
        w->len = 0;
    } else if (ok == 0) {
        ok = put(w, buffer.buf, buffer.len);
    }
    PyBuffer_Release(&buffer);
    return ok;
}

/* A dict or a Struct (whose get is dict's); the value of `name`, or `fallback`: borrowed. */
static PyObject *field(PyObject *obj, PyObject *name, PyObject *fallback) {
    PyObject *v = PyDict_GetItemWithError(obj, name);
    return v != NULL || PyErr_Occurred() ? v : fallback;
}

static int put_struct(Writer *w, PyObject *program, PyObject *obj) {
    PyTypeObject *record = (PyTypeObject *)PyTuple_GET_ITEM(program, 0);
    if (!PyDict_CheckExact(obj) && !PyObject_TypeCheck(obj, record->tp_base))
        return refuse();
    PyObject *fields = PyTuple_GET_ITEM(program, 2);
    PyObject *names = PyTuple_GET_ITEM(program, 3);
    PyObject *defaults = PyTuple_GET_ITEM(program, 5);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(fields); i++) {
        PyObject *v = field(obj, PyTuple_GET_ITEM(names, i), PyTuple_GET_ITEM(defaults, i));
        if (v == NULL)
            return -1;
        Py_INCREF(v);   /* (a value's __bool__ could change the dict) */
        int ok = put_value(w, PyTuple_GET_ITEM(fields, i), v);
        Py_DECREF(v);
        if (ok < 0)
            return -1;
    }
    if (PyTuple_GET_ITEM(program, 1) != Py_True)
        return 0;
    PyObject *tagged = PyTuple_GET_ITEM(program, 6);   /* none written: one other than its default refuses */
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tagged); i++) {
        PyObject *tag = PyTuple_GET_ITEM(tagged, i);
        PyObject *v = field(obj, PyTuple_GET_ITEM(tag, 0), NULL);
        if (v == NULL) {
            if (PyErr_Occurred())
                return -1;
            continue;
        }
        Py_INCREF(v);   /* Python's != (no shortcut for the default object itself: a NaN differs) */
        PyObject *compared = PyObject_RichCompare(v, PyTuple_GET_ITEM(tag, 1), Py_NE);
        Py_DECREF(v);
        int differs = compared == NULL ? -1 : PyObject_IsTrue(compared);
        Py_XDECREF(compared);
        if (differs != 0)
            return differs < 0 ? -1 : refuse();
    }
    return put(w, "\0", 1);
}

static PyObject *encode(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if ((nargs != 3 && nargs != 4) || !PyTuple_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "encode(program, large_part, obj, head=b'')");
        return NULL;
    }
    Writer w = {NULL, 0, 0, NULL, PyLong_AsSsize_t(args[1])};
    if (w.large_part == -1 && PyErr_Occurred())
        return NULL;
    int ok = 0;
    if (nargs == 4) {
        Py_buffer head;
        if (PyObject_GetBuffer(args[3], &head, PyBUF_SIMPLE) < 0)
            return NULL;
        ok = put(&w, head.buf, head.len);
        PyBuffer_Release(&head);
    }
    if (ok == 0)
        ok = put_struct(&w, args[0], args[2]);
    PyObject *result = NULL;
    if (ok == 0) {
        result = PyBytes_FromStringAndSize(w.p, w.len);
        if (result != NULL && w.parts != NULL) {   /* the joined rest is the last part */
            int appended = PyList_Append(w.parts, result);
            Py_DECREF(result);
            result = appended < 0 ? NULL : Py_NewRef(w.parts);
        }
    }
    Py_XDECREF(w.parts);
    PyMem_Free(w.p);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", (PyCFunction)(void (*)(void))decode, METH_FASTCALL,
     "decode(program, views, data, pos): (struct, end) of the struct `program` describes, read from "
     "data at pos, as the compiled Python decoder reads it; ValueError where that one raises."},
    {"encode", (PyCFunction)(void (*)(void))encode, METH_FASTCALL,
     "encode(program, large_part, obj, head=b''): head, then obj written as the struct `program` describes, "
     "as bytes; with large_part > 0, RECORDS that large left apart (a list of parts). ValueError where "
     "the compiled Python encoder raises."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_codecs", NULL, -1, methods};

PyMODINIT_FUNC PyInit__codecs(void) {
    empty_tuple = PyTuple_New(0);
    return empty_tuple == NULL ? NULL : PyModule_Create(&module);
}
