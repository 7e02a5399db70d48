/* odradek.protocol._frames: request frames in C, the steps every small request takes on a broker
   before and after its handler: cutting whole frames out of the bytes a read returned, reading the
   request header (and, for the common Produce, its body), and writing the common Produce's answer.
   Each answers exactly as the Python it stands in for, and none raises for any frame nor reads
   outside it.

   - cut(data, pos, max_size, frames) appends to the list `frames`, as bytes, each whole frame
     (int32 size, then that many bytes) from data[pos:], and returns where it stopped: at the end,
     before a size prefix cut short, before a frame not yet whole, or before a size below zero or
     above max_size. protocol/connection.py:FrameReader.feed does the rest as it did before (a
     partial prefix or frame kept for the next read, the oversize that stops it);
     tests/unit/test_connection.py holds the reader with and without it to the same frames.
   - read_header(table, header_type, frame) returns what protocol/header.py:decode_request_header
     returns, (header_type(api_key, api_version, correlation_id, client_id), where the body
     starts), for a frame whose key and version the table gives a header version (0-2; byte
     key * 32 + version, header.py:request_header_table), or None for any frame it does not read
     (then the Python reader answers it, or raises its error); tests/unit/test_protocol_header.py
     holds the two to that.
   - read_frame(header_type, request_type, frame) returns exactly what
     protocol/produce_one.py:_read_frame_py returns for the same frame:
     (header_type(api_key, api_version, correlation_id, client_id),
     request_type(acks, timeout_ms, topic, partition, records)) for a Produce v3-9 frame of one
     topic of one partition without a transactional id, whose request header decodes (a v2
     header's tagged fields skipped), else None. `records` is frame[start:end], so a bytes frame
     gives bytes and a memoryview gives a view of it. tests/unit/test_produce_one.py holds the two
     readers to each other on generated, cut, flipped and extended frames.

   - encode_answer(version, correlation_id, topic, ...) writes the whole response to a Produce of
     one partition answered without record errors or a message: what
     protocol/produce_one.py:_encode_answer_py writes (tests/unit/test_produce_one.py).

   They exist because the same steps in Python cost about 0.5 us a frame (the cut), 0.5 us a
   header, 3 us a Produce (its header, then its body) and 1 us its answer, of the broker's 15-19 us
   a Produce; here they cost the objects they make.

   The Produce layouts (big-endian; a compact length is an unsigned varint of length + 1):
       header v1: api_key int16 | api_version int16 | correlation_id int32 | client_id int16-length string
       header v2: header v1 | tagged fields (count uvarint, then tag uvarint, size uvarint, bytes each)
       body v3-8: transactional_id int16 (-1) | acks int16 | timeout_ms int32 | topics int32 (1) |
                  name int16-length | partitions int32 (1) | index int32 | records int32-length
       body v9:   transactional_id (0: null) | acks int16 | timeout_ms int32 | topics (2) |
                  name (one-byte compact length) | partitions (2) | index int32 |
                  records compact length | records | three empty tagged-field sections */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define FIRST_VERSION 3
#define FLEXIBLE_FROM 9

static int16_t be16(const unsigned char *p) { return (int16_t)((p[0] << 8) | p[1]); }

static int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

/* An unsigned varint of at most 5 bytes at *pos, as primitives.uvarint_at reads it. 0 on success. */
static int uvarint(const unsigned char *p, Py_ssize_t n, Py_ssize_t *pos, int64_t *out) {
    int64_t value = 0;
    for (int shift = 0; shift <= 28; shift += 7) {
        if (*pos >= n) return -1;
        unsigned char b = p[(*pos)++];
        value |= (int64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *out = value;
            return 0;
        }
    }
    return -1;
}

/* A strict UTF-8 string, or NULL (no error set) when the bytes are not UTF-8. */
static PyObject *utf8(const unsigned char *p, Py_ssize_t size) {
    PyObject *s = PyUnicode_DecodeUTF8((const char *)p, size, NULL);
    if (s == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
    return s;
}

/* A tuple subclass of the n items, whose references it takes (all of them, even on failure; an
   item may be NULL, out of memory, and then so is the answer). */
static PyObject *new_tuple(PyTypeObject *type, Py_ssize_t n, PyObject **items) {
    int complete = 1;
    for (Py_ssize_t i = 0; i < n; i++)
        if (items[i] == NULL) complete = 0;
    PyObject *t = complete ? type->tp_alloc(type, n) : NULL;
    if (t == NULL) {
        for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(items[i]);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(t, i, items[i]);
    return t;
}

static int tuple_type(PyObject *type) {
    return PyType_Check(type) && PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type);
}

/* One contiguous run of bytes of `data`, or 0 (no error set) when it is none. */
static int byte_run(PyObject *data, Py_buffer *view) {
    if (PyObject_GetBuffer(data, view, PyBUF_RECORDS_RO) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (view->ndim != 1 || !PyBuffer_IsContiguous(view, 'C') || view->format == NULL
            || strcmp(view->format, "B") != 0) {
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

static PyObject *cut(PyObject *self, PyObject *args) {
    PyObject *data, *frames;
    Py_ssize_t pos, max_size;
    if (!PyArg_ParseTuple(args, "OnnO!", &data, &pos, &max_size, &PyList_Type, &frames)) return NULL;
    Py_buffer view;
    if (!byte_run(data, &view)) {
        PyErr_SetString(PyExc_TypeError, "data must be bytes or a view of one run of bytes");
        return NULL;
    }
    const unsigned char *p = view.buf;
    const Py_ssize_t n = view.len;
    if (pos < 0) pos = 0;
    while (n - pos >= 4) {
        int32_t size = be32(p + pos);
        if (size < 0 || size > max_size || n - pos - 4 < size) break;
        PyObject *frame = PyBytes_FromStringAndSize((const char *)p + pos + 4, size);
        if (frame == NULL || PyList_Append(frames, frame) < 0) {
            Py_XDECREF(frame);
            PyBuffer_Release(&view);
            return NULL;
        }
        Py_DECREF(frame);
        pos += 4 + (Py_ssize_t)size;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(pos);
}

/* The request header of `header_version` (0, 1 or 2) at the start of p[0:n], as header.py's
   decode_request_header reads it: where the body starts, with the fields set (client_id a new
   reference); -1 when it does not decode (nothing set, no error); -2 out of memory (error set). */
static Py_ssize_t parse_header(const unsigned char *p, Py_ssize_t n, int header_version, int16_t *key,
                               int16_t *version, int32_t *correlation_id, PyObject **client_id) {
    if (n < 8) return -1;
    *key = be16(p);
    *version = be16(p + 2);
    *correlation_id = be32(p + 4);
    Py_ssize_t pos = 8;
    PyObject *id;
    if (header_version == 0) {
        *client_id = Py_NewRef(Py_None);
        return pos;
    }
    if (n < 10) return -1;
    int16_t id_size = be16(p + 8);
    pos = 10;
    if (id_size >= 0) {
        if (pos + id_size > n) return -1;
        if ((id = utf8(p + pos, id_size)) == NULL) return PyErr_Occurred() ? -2 : -1;
        pos += id_size;
    } else if (id_size == -1) {
        id = Py_NewRef(Py_None);
    } else {
        return -1;
    }
    if (header_version >= 2) {   /* tagged fields: skipped */
        int64_t count, tag, size;
        int ok = uvarint(p, n, &pos, &count) == 0;
        for (int64_t i = 0; ok && i < count; i++) {
            ok = uvarint(p, n, &pos, &tag) == 0 && uvarint(p, n, &pos, &size) == 0;
            pos += ok ? (Py_ssize_t)size : 0;
            ok = ok && pos <= n;
        }
        if (!ok) {
            Py_DECREF(id);
            return -1;
        }
    }
    *client_id = id;
    return pos;
}

#define TABLE_VERSIONS 32   /* a header-version table's versions per api key (header.py) */

static PyObject *read_header(PyObject *self, PyObject *args) {
    PyObject *table, *header_type, *frame;
    if (!PyArg_ParseTuple(args, "O!OO", &PyBytes_Type, &table, &header_type, &frame)) return NULL;
    if (!tuple_type(header_type)) {
        PyErr_SetString(PyExc_TypeError, "header_type must be a tuple subclass");
        return NULL;
    }
    Py_buffer view;
    if (!byte_run(frame, &view)) Py_RETURN_NONE;
    const unsigned char *p = view.buf;
    int header_version = 255;
    if (view.len >= 4) {
        int16_t key = be16(p), version = be16(p + 2);
        Py_ssize_t at = (Py_ssize_t)key * TABLE_VERSIONS + version;
        if (key >= 0 && version >= 0 && version < TABLE_VERSIONS && at < PyBytes_GET_SIZE(table))
            header_version = (unsigned char)PyBytes_AS_STRING(table)[at];
    }
    int16_t key, version;
    int32_t correlation_id;
    PyObject *client_id = NULL;
    Py_ssize_t pos = header_version <= 2
        ? parse_header(p, view.len, header_version, &key, &version, &correlation_id, &client_id) : -1;
    PyBuffer_Release(&view);
    if (pos == -2) return NULL;
    if (pos < 0) Py_RETURN_NONE;
    PyObject *items[4] = {PyLong_FromLong(key), PyLong_FromLong(version), PyLong_FromLong(correlation_id), client_id};
    PyObject *header = new_tuple((PyTypeObject *)header_type, 4, items);
    if (header == NULL) return NULL;
    PyObject *result = Py_BuildValue("(Nn)", header, pos);
    return result;
}

static PyObject *read_frame(PyObject *self, PyObject *args) {
    PyObject *header_type, *request_type, *frame;
    if (!PyArg_ParseTuple(args, "OOO", &header_type, &request_type, &frame)) return NULL;
    if (!tuple_type(header_type) || !tuple_type(request_type)) {
        PyErr_SetString(PyExc_TypeError, "header_type and request_type must be tuple subclasses");
        return NULL;
    }
    if (!PyBytes_CheckExact(frame) && !PyMemoryView_Check(frame)) Py_RETURN_NONE;
    Py_buffer view;
    if (!byte_run(frame, &view)) Py_RETURN_NONE;   /* not one run of bytes: not a frame the reader cuts */
    const unsigned char *p = view.buf;
    const Py_ssize_t n = view.len;
    PyObject *client_id = NULL, *topic = NULL, *records = NULL, *result = NULL;
    int ok = 0;
    int16_t version = 0, acks = 0;
    int32_t correlation_id = 0, timeout_ms = 0, index = 0;
    Py_ssize_t pos, start, end;

    /* the request header */
    int16_t key;
    if (n < 4 || be16(p) != 0) goto done;
    version = be16(p + 2);
    if (version < FIRST_VERSION || version > FLEXIBLE_FROM) goto done;
    pos = parse_header(p, n, version >= FLEXIBLE_FROM ? 2 : 1, &key, &version, &correlation_id, &client_id);
    if (pos < 0) goto done;

    /* the body */
    Py_ssize_t name_size;
    if (version < FLEXIBLE_FROM) {
        if (pos + 14 > n || be16(p + pos) != -1 || be32(p + pos + 8) != 1) goto done;
        acks = be16(p + pos + 2);
        timeout_ms = be32(p + pos + 4);
        name_size = be16(p + pos + 12);
        pos += 14;
        end = pos + name_size;
        if (name_size < 0 || end > n) goto done;
        if ((topic = utf8(p + pos, name_size)) == NULL) goto done;
        if (end + 12 > n || be32(p + end) != 1) goto done;
        index = be32(p + end + 4);
        int32_t size = be32(p + end + 8);
        start = end + 12;
        if (size < 0 || start + size != n) goto done;
        end = n;
    } else {
        if (pos + 9 > n || p[pos] != 0 || p[pos + 7] != 2) goto done;
        acks = be16(p + pos + 1);
        timeout_ms = be32(p + pos + 3);
        name_size = (Py_ssize_t)p[pos + 8] - 1;
        pos += 9;
        end = pos + name_size;
        if (name_size < 0 || name_size >= 0x7F || end > n) goto done;
        if ((topic = utf8(p + pos, name_size)) == NULL) goto done;
        if (end + 5 > n || p[end] != 2) goto done;
        index = be32(p + end + 1);
        start = end + 5;
        int64_t size;
        if (uvarint(p, n, &start, &size) < 0) goto done;
        size -= 1;
        end = start + (Py_ssize_t)size;
        if (size < 0 || end + 3 != n || p[end] != 0 || p[end + 1] != 0 || p[end + 2] != 0) goto done;
    }
    if ((records = PySequence_GetSlice(frame, start, end)) == NULL) goto done;
    ok = 1;

done:
    PyBuffer_Release(&view);
    if (!ok) {
        Py_XDECREF(client_id);
        Py_XDECREF(topic);
        Py_XDECREF(records);
        if (PyErr_Occurred()) return NULL;   /* out of memory, not a frame we decline */
        Py_RETURN_NONE;
    }
    PyObject *header_items[4] = {PyLong_FromLong(0), PyLong_FromLong(version), PyLong_FromLong(correlation_id),
                                 client_id};
    PyObject *request_items[5] = {PyLong_FromLong(acks), PyLong_FromLong(timeout_ms), topic,
                                  PyLong_FromLong(index), records};
    PyObject *header = new_tuple((PyTypeObject *)header_type, 4, header_items);
    PyObject *request = new_tuple((PyTypeObject *)request_type, 5, request_items);
    if (header != NULL && request != NULL) result = PyTuple_Pack(2, header, request);
    Py_XDECREF(header);
    Py_XDECREF(request);
    return result;
}

static unsigned char *put16(unsigned char *o, int v) { o[0] = (unsigned char)(v >> 8); o[1] = (unsigned char)v; return o + 2; }

static unsigned char *put32(unsigned char *o, int32_t v) {
    uint32_t u = (uint32_t)v;
    o[0] = u >> 24; o[1] = u >> 16; o[2] = u >> 8; o[3] = u;
    return o + 4;
}

static unsigned char *put64(unsigned char *o, int64_t v) {
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) o[7 - i] = (unsigned char)(u >> (8 * i));
    return o + 8;
}

static PyObject *encode_answer(PyObject *self, PyObject *args) {
    int version;
    short error_code;
    int correlation_id, index;
    long long base_offset, log_append_time, log_start_offset;
    PyObject *topic;
    if (!PyArg_ParseTuple(args, "iiUihLLL", &version, &correlation_id, &topic, &index, &error_code, &base_offset,
                          &log_append_time, &log_start_offset))
        return NULL;
    if (version < FIRST_VERSION || version > FLEXIBLE_FROM) {
        PyErr_Format(PyExc_ValueError, "no one-partition answer for Produce v%d", version);
        return NULL;
    }
    Py_ssize_t name_size;
    const char *name = PyUnicode_AsUTF8AndSize(topic, &name_size);
    if (name == NULL) return NULL;
    if (version < FLEXIBLE_FROM && name_size > 0x7FFF) {
        PyErr_SetString(PyExc_ValueError, "a topic name longer than an int16 length");
        return NULL;
    }
    unsigned char length[5];   /* v9: the name's compact length, an unsigned varint */
    int length_size = 0;
    for (uint64_t u = (uint64_t)name_size + 1;; u >>= 7) {
        length[length_size++] = (unsigned char)((u & 0x7F) | (u >= 0x80 ? 0x80 : 0));
        if (u < 0x80) break;
    }
    Py_ssize_t size = version < FLEXIBLE_FROM
        ? 4 + 4 + 2 + name_size + 4 + 4 + 2 + 8 + 8 + (version >= 5 ? 8 : 0) + (version >= 8 ? 4 + 2 : 0) + 4
        : 4 + 1 + 1 + length_size + name_size + 1 + 4 + 2 + 8 + 8 + 8 + 1 + 1 + 1 + 1 + 4 + 1;
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    o = put32(o, correlation_id);
    if (version < FLEXIBLE_FROM) {
        o = put32(o, 1);                                  /* one topic */
        o = put16(o, (int)name_size);
        memcpy(o, name, name_size); o += name_size;
        o = put32(o, 1);                                  /* one partition */
    } else {
        *o++ = 0;                                         /* the response header's tagged fields */
        *o++ = 2;                                         /* one topic */
        memcpy(o, length, length_size); o += length_size;
        memcpy(o, name, name_size); o += name_size;
        *o++ = 2;                                         /* one partition */
    }
    o = put32(o, index);
    o = put16(o, error_code);
    o = put64(o, base_offset);
    o = put64(o, log_append_time);
    if (version >= 5) o = put64(o, log_start_offset);
    if (version == 8) {
        o = put32(o, 0);                                  /* no record errors */
        o = put16(o, -1);                                 /* no error message */
    } else if (version == FLEXIBLE_FROM) {
        *o++ = 1; *o++ = 0;                               /* no record errors, no error message */
        *o++ = 0; *o++ = 0;                               /* the partition's and the topic's tagged fields */
    }
    o = put32(o, 0);                                      /* throttle time */
    if (version == FLEXIBLE_FROM) *o++ = 0;               /* the response's tagged fields */
    assert(o == (unsigned char *)PyBytes_AS_STRING(out) + size);
    return out;
}

static PyMethodDef methods[] = {
    {"cut", cut, METH_VARARGS,
     "cut(data, pos, max_size, frames): append each whole frame from data[pos:] to the list frames, "
     "as bytes; where it stopped."},
    {"read_header", read_header, METH_VARARGS,
     "read_header(table, header_type, frame): (header_type(api_key, api_version, correlation_id, client_id), "
     "where the body starts) of a request whose header version the table gives, or None."},
    {"read_frame", read_frame, METH_VARARGS,
     "read_frame(header_type, request_type, frame): (header, request) of a common Produce frame "
     "(one partition, no transactional id, v3-9), or None."},
    {"encode_answer", encode_answer, METH_VARARGS,
     "encode_answer(version, correlation_id, topic, index, error_code, base_offset, log_append_time, "
     "log_start_offset): the whole response (header and body) of a one-partition Produce answered "
     "without record errors or a message."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_frames", NULL, -1, methods};

PyMODINIT_FUNC PyInit__frames(void) { return PyModule_Create(&module); }
