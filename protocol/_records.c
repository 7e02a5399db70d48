/* odradek.protocol._records: the records section of a RecordBatch v2 in C, the one compiled part
   of odradek. Walks over the same layout, and one writer of it:

   - scan() checks it field by field for the broker's validation of produced batches. It accepts
     exactly what broker/log/validator.py's pure-Python _scan_py accepts
     (tests/unit/test_batch_validation.py runs both on the same batches), and allocates nothing
     unless asked to collect.
   - check_client_batch() checks the one batch of a producer's common Produce as a whole, its header
     as broker/log/validator.py checks it and its records with scan()'s walk, or declines.
   - append_record() writes one record, as a producer's BatchBuilder.append does in Python.
   - decode() turns it into records for every reader of batches (the consumers, the broker's
     loading of __consumer_offsets and __transaction_state, the cleaner). It returns exactly what
     protocol/records.py's pure-Python _decode_py returns, or None for anything else: a section
     that is malformed, or holds a value past 64 bits. The caller then runs _decode_py, which
     gives the canonical error (or the exotic answer); tests/unit/test_record_decoder.py holds the
     two to that on generated, cut, flipped and extended sections.

   Neither reads outside data[start:end].

   A records section is `count` records, each:
       length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
       keyLength varint | key | valueLength varint | value | headerCount varint |
       headers (keyLength varint, key, valueLength varint, value)...
   where every varint is zig-zag encoded (at most 5 bytes; varlongs 10), the fields fill
   `length` bytes exactly, and the records end exactly at `end`. Offset deltas are 0..count-1
   (strict: a batch as a producer builds it) or strictly increasing up to last_delta (a stored
   batch, whose records compaction may have removed).

   It exists because the same walks in Python cost about 1.5 us (scan) and 2-5 us (decode) per
   record; here scan costs a few nanoseconds, and decode about 0.2 us, nearly all of it the
   objects it makes. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} cursor;

/* One zig-zag varint of at most max_bytes bytes, not past c->end. 0 on success. A 10th byte's
   bits past 64 fall off, unless `whole`: then such a varint fails (Python's records.py reads every
   field with up to 10 bytes, and those bits as a larger int). */
static int read_varint(cursor *c, int max_bytes, int whole, int64_t *out) {
    uint64_t u = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (c->p >= c->end) return -1;
        unsigned char b = *c->p++;
        if (whole && i == 9 && (b & 0x7E)) return -3;
        u |= (uint64_t)(b & 0x7F) << (7 * i);
        if (b < 0x80) {
            *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            return 0;
        }
    }
    return -2;
}

static PyObject *invalid(const char *fmt, Py_ssize_t i) {
    PyErr_Format(PyExc_ValueError, fmt, i);
    return NULL;
}

static int append_int(PyObject *list, int64_t v) {
    PyObject *o = PyLong_FromLongLong(v);
    if (o == NULL) return -1;
    int r = PyList_Append(list, o);
    Py_DECREF(o);
    return r;
}

/* The walk of scan() over data[c.p:c.end]: 0, or -1 with ValueError set naming the record (or
   an error of the lists' appends). With null_keys/timestamps not NULL, it appends to them. */
static int walk(cursor c, Py_ssize_t count, long long last_delta, int strict, long long base_ts,
                PyObject *null_keys, PyObject *timestamps) {
    int64_t previous = -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, ts_delta, delta, klen, vlen, nheaders, hk, hv;
        if (c.p >= c.end) {
            invalid("incorrect declared batch size, premature EOF reached at record %zd", i);
            return -1;
        }
        if (read_varint(&c, 5, 0, &length) != 0 || length < 6 || length > c.end - c.p) {
            invalid("invalid record size at record %zd", i);
            return -1;
        }
        cursor r = {c.p, c.p + length};
        r.p++; /* attributes: unused in v2 */
        if (read_varint(&r, 10, 0, &ts_delta) != 0 || read_varint(&r, 5, 0, &delta) != 0) {
            invalid("record %zd's fields do not fill its size", i);
            return -1;
        }
        if (strict ? delta != i : (delta <= previous || delta > last_delta)) {
            invalid("record %zd has an offset delta out of order", i);
            return -1;
        }
        previous = delta;
        if (read_varint(&r, 5, 0, &klen) != 0 || klen < -1 || (klen > 0 && klen > r.end - r.p)) {
            invalid("invalid key length at record %zd", i);
            return -1;
        }
        if (klen > 0) r.p += klen;
        if (read_varint(&r, 5, 0, &vlen) != 0 || vlen < -1 || (vlen > 0 && vlen > r.end - r.p)) {
            invalid("invalid value length at record %zd", i);
            return -1;
        }
        if (vlen > 0) r.p += vlen;
        if (read_varint(&r, 5, 0, &nheaders) != 0 || nheaders < 0) {
            invalid("invalid number of record headers at record %zd", i);
            return -1;
        }
        for (int64_t h = 0; h < nheaders; h++) {
            if (read_varint(&r, 5, 0, &hk) != 0 || hk < 0 || hk > r.end - r.p) {
                invalid("invalid header key size at record %zd", i);
                return -1;
            }
            r.p += hk;
            if (read_varint(&r, 5, 0, &hv) != 0 || hv < -1 || (hv > 0 && hv > r.end - r.p)) {
                invalid("invalid header value length at record %zd", i);
                return -1;
            }
            if (hv > 0) r.p += hv;
        }
        if (r.p != r.end) {
            invalid("record %zd's fields do not fill its size", i);
            return -1;
        }
        if (null_keys != NULL && ((klen < 0 && append_int(null_keys, i) != 0)
                                  || append_int(timestamps, (int64_t)((uint64_t)base_ts + (uint64_t)ts_delta)) != 0))
            return -1;
        c.p = r.end;
    }
    if (c.p != c.end) {
        invalid("incorrect declared batch size, records still remaining after record %zd", count);
        return -1;
    }
    return 0;
}

/* scan(data, start, end, count, last_delta, strict, base_timestamp, collect)
   -> None, or with collect a tuple (indexes of records without a key, every record's timestamp).
   Raises ValueError with a message naming the record for anything malformed. */
static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end, count;
    long long last_delta, base_ts;
    int strict, collect;
    if (!PyArg_ParseTuple(args, "y*nnnLpLp", &view, &start, &end, &count, &last_delta, &strict,
                          &base_ts, &collect))
        return NULL;
    PyObject *result = NULL, *null_keys = NULL, *timestamps = NULL;
    if (start < 0 || end > view.len || start > end) {
        PyErr_SetString(PyExc_ValueError, "records section outside the buffer");
        goto done;
    }
    if (collect && ((null_keys = PyList_New(0)) == NULL || (timestamps = PyList_New(0)) == NULL))
        goto done;
    const unsigned char *base = (const unsigned char *)view.buf;
    cursor c = {base + start, base + end};
    if (walk(c, count, last_delta, strict, base_ts, null_keys, timestamps) != 0)
        goto done;
    if (collect)
        result = PyTuple_Pack(2, null_keys, timestamps);
    else {
        Py_INCREF(Py_None);
        result = Py_None;
    }
done:
    Py_XDECREF(null_keys);
    Py_XDECREF(timestamps);
    PyBuffer_Release(&view);
    return result;
}

static int64_t be(const unsigned char *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v = (v << 8) | p[i];
    if (n < 8 && (v >> (8 * n - 1)) & 1) v |= ~(uint64_t)0 << (8 * n);   /* sign-extend */
    return (int64_t)v;
}

/* check_client_batch(data, max_size) -> the 13 header fields of the one batch filling data, or
   None. The fields come back only for the common batch a producer sends, checked as
   broker/log/validator.py's validate_leader checks it (all but the CRC, which the caller checks):
   magic 2, a length filling data exactly and at most max_size, base offset 0, records count equal
   to lastOffsetDelta + 1 and above 0, no compression, CreateTime, no control bit, a producer id
   with its epoch and sequence set (or none, and no transactional bit), and records that the strict
   walk of scan() accepts. Anything else (an error, or a batch the Python checks must look at
   closer) is None, and the caller checks it the general way, which answers it. */
static PyObject *check_client_batch(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t max_size;
    if (!PyArg_ParseTuple(args, "y*n", &view, &max_size))
        return NULL;
    PyObject *result = NULL;
    const unsigned char *b = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len;
    if (n < 61) goto decline;
    int64_t base_offset = be(b, 8), batch_length = be(b + 8, 4), epoch = be(b + 12, 4), magic = be(b + 16, 1);
    int64_t crc = (int64_t)(uint32_t)be(b + 17, 4), attributes = be(b + 21, 2), last_delta = be(b + 23, 4);
    int64_t base_ts = be(b + 27, 8), max_ts = be(b + 35, 8), producer_id = be(b + 43, 8);
    int64_t producer_epoch = be(b + 51, 2), base_sequence = be(b + 53, 4), count = be(b + 57, 4);
    if (magic != 2 || batch_length < 49 || 12 + batch_length != n || n > max_size || base_offset != 0)
        goto decline;
    if (count <= 0 || count != last_delta + 1 || (attributes & 0x2F) != 0)   /* codec, LogAppendTime, control */
        goto decline;
    if (producer_id >= 0 ? (producer_epoch < 0 || base_sequence < 0) : (attributes & 0x10) != 0)
        goto decline;
    cursor c = {b + 61, b + n};
    if (walk(c, (Py_ssize_t)count, last_delta, 1, base_ts, NULL, NULL) != 0) {
        PyErr_Clear();
        goto decline;
    }
    result = Py_BuildValue("(LLLLLLLLLLLLL)", (long long)base_offset, (long long)batch_length, (long long)epoch,
                           (long long)magic, (long long)crc, (long long)attributes, (long long)last_delta,
                           (long long)base_ts, (long long)max_ts, (long long)producer_id,
                           (long long)producer_epoch, (long long)base_sequence, (long long)count);
    PyBuffer_Release(&view);
    return result;
decline:
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

/* bytes of a field of length n at r->p (None when n < 0); NULL with no exception set when the
   field runs past the record (decline), NULL with one set when out of memory. */
static PyObject *field(cursor *r, int64_t n) {
    if (n < 0) Py_RETURN_NONE;
    if (n > r->end - r->p) return NULL;
    PyObject *b = PyBytes_FromStringAndSize((const char *)r->p, (Py_ssize_t)n);
    r->p += n;
    return b;
}

/* A record's headers: a list of (str key, bytes or None value); NULL as field() does. */
static PyObject *headers(cursor *r) {
    int64_t count, klen, vlen;
    if (read_varint(r, 10, 1, &count) != 0 || count < 0) return NULL;
    PyObject *list = PyList_New(0);
    if (list == NULL) return NULL;
    for (int64_t h = 0; h < count; h++) {
        if (read_varint(r, 10, 1, &klen) != 0 || klen < 0 || klen > r->end - r->p) goto fail;
        PyObject *key = PyUnicode_DecodeUTF8((const char *)r->p, (Py_ssize_t)klen, NULL);
        if (key == NULL) {   /* not utf-8: malformed, not an error to raise here */
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
            goto fail;
        }
        r->p += klen;
        PyObject *value = read_varint(r, 10, 1, &vlen) == 0 ? field(r, vlen) : NULL;
        if (value == NULL) {
            Py_DECREF(key);
            goto fail;
        }
        PyObject *pair = PyTuple_Pack(2, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (pair == NULL || PyList_Append(list, pair) != 0) {
            Py_XDECREF(pair);
            goto fail;
        }
        Py_DECREF(pair);
    }
    return list;
fail: /* malformed (no exception set) or out of memory */
    Py_DECREF(list);
    return NULL;
}

/* decode(data, start, end, count, base_offset, base_timestamp, log_append_time, record_type)
   -> [record_type(offset, timestamp, key, value, headers, timestamp_type), ...], or None to
   leave the section to the Python decoder (see the header comment). ``log_append_time`` is None
   (each record's timestamp is base_timestamp + its delta: CREATE_TIME) or every record's
   timestamp (LOG_APPEND_TIME); ``record_type`` is a 6-field tuple subclass (records.py:Record). */
static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t start, end, count;
    long long base_offset, base_ts;
    PyObject *append_time, *record_type;
    if (!PyArg_ParseTuple(args, "y*nnnLLOO", &view, &start, &end, &count, &base_offset, &base_ts,
                          &append_time, &record_type))
        return NULL;
    if (!PyType_Check(record_type) || !PyType_IsSubtype((PyTypeObject *)record_type, &PyTuple_Type)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "record_type must be a tuple subclass");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)record_type;
    int create_time = append_time == Py_None;
    PyObject *list = NULL, *ts_type = PyLong_FromLong(create_time ? 0 : 1);
    if (ts_type == NULL || start < 0 || end > view.len || start > end || (list = PyList_New(0)) == NULL)
        goto decline;
    const unsigned char *base = (const unsigned char *)view.buf;
    cursor c = {base + start, base + end};
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, ts_delta, delta, klen, vlen, offset, ts = 0;
        if (read_varint(&c, 10, 1, &length) != 0 || length < 6 || length > c.end - c.p) goto decline;
        cursor r = {c.p, c.p + length};
        r.p++; /* attributes: unused in v2 */
        if (read_varint(&r, 10, 1, &ts_delta) != 0 || read_varint(&r, 10, 1, &delta) != 0
            || __builtin_add_overflow((int64_t)base_offset, delta, &offset)
            || (create_time && __builtin_add_overflow((int64_t)base_ts, ts_delta, &ts)))
            goto decline;
        PyObject *items[6] = {NULL, NULL, NULL, NULL, NULL, ts_type};
        if (read_varint(&r, 10, 1, &klen) != 0 || (items[2] = field(&r, klen)) == NULL
            || read_varint(&r, 10, 1, &vlen) != 0 || (items[3] = field(&r, vlen)) == NULL
            || (items[4] = headers(&r)) == NULL || r.p != r.end
            || (items[0] = PyLong_FromLongLong(offset)) == NULL
            || (items[1] = create_time ? PyLong_FromLongLong(ts) : (Py_INCREF(append_time), append_time)) == NULL) {
            for (int k = 0; k < 5; k++) Py_XDECREF(items[k]);
            goto decline;
        }
        PyObject *record = type->tp_alloc(type, 6);
        if (record == NULL) {
            for (int k = 0; k < 5; k++) Py_DECREF(items[k]);
            goto decline;
        }
        Py_INCREF(ts_type);
        for (int k = 0; k < 6; k++) PyTuple_SET_ITEM(record, k, items[k]);
        int appended = PyList_Append(list, record);
        Py_DECREF(record);
        if (appended != 0) goto decline;
        c.p = r.end;
    }
    if (c.p == c.end) {
        Py_DECREF(ts_type);
        PyBuffer_Release(&view);
        return list;
    }
decline: /* malformed or out of range: None; out of memory: the MemoryError */
    Py_XDECREF(list);
    Py_XDECREF(ts_type);
    PyBuffer_Release(&view);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* Zig-zag varint of v into out (at most 10 bytes); its length. */
static int put_varint(unsigned char *out, int64_t v) {
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 0;
    while (u >= 0x80) {
        out[n++] = (unsigned char)(u | 0x80);
        u >>= 7;
    }
    out[n++] = (unsigned char)u;
    return n;
}

/* append_record(buf, offset_delta, timestamp_delta, key, value, headers): one record appended
   to the bytearray buf, byte for byte what protocol/records.py's BatchBuilder.append writes in
   Python: length, attributes 0, timestampDelta, offsetDelta, key and value (None: length -1),
   then headers, already encoded (their count first). OverflowError for a delta past 64 bits
   (the caller writes those in Python). */
static PyObject *append_record(PyObject *self, PyObject *args) {
    PyObject *buf, *key, *value;
    long long offset_delta, ts_delta;
    Py_buffer k = {0}, v = {0}, h;
    if (!PyArg_ParseTuple(args, "YLLOOy*", &buf, &offset_delta, &ts_delta, &key, &value, &h))
        return NULL;
    PyObject *result = NULL;
    int have_k = key != Py_None, have_v = value != Py_None;
    if (have_k && PyObject_GetBuffer(key, &k, PyBUF_SIMPLE) != 0) goto done;
    if (have_v && PyObject_GetBuffer(value, &v, PyBUF_SIMPLE) != 0) goto done;
    unsigned char head[40], kl[10], vl[10], len_buf[10];
    int n = 0;
    head[n++] = 0;   /* attributes */
    n += put_varint(head + n, ts_delta);
    n += put_varint(head + n, offset_delta);
    int nkl = put_varint(kl, have_k ? (int64_t)k.len : -1);
    int nvl = put_varint(vl, have_v ? (int64_t)v.len : -1);
    int64_t size = n + nkl + (have_k ? k.len : 0) + nvl + (have_v ? v.len : 0) + h.len;
    int nlen = put_varint(len_buf, size);
    Py_ssize_t at = PyByteArray_GET_SIZE(buf);
    if (PyByteArray_Resize(buf, at + nlen + size) != 0) goto done;
    unsigned char *out = (unsigned char *)PyByteArray_AS_STRING(buf) + at;
    memcpy(out, len_buf, nlen); out += nlen;
    memcpy(out, head, n); out += n;
    memcpy(out, kl, nkl); out += nkl;
    if (have_k) { memcpy(out, k.buf, k.len); out += k.len; }
    memcpy(out, vl, nvl); out += nvl;
    if (have_v) { memcpy(out, v.buf, v.len); out += v.len; }
    memcpy(out, h.buf, h.len);
    Py_INCREF(Py_None);
    result = Py_None;
done:
    if (have_k && k.obj != NULL) PyBuffer_Release(&k);
    if (have_v && v.obj != NULL) PyBuffer_Release(&v);
    PyBuffer_Release(&h);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(data, start, end, count, last_delta, strict, base_timestamp, collect): check a records "
     "section; ValueError if malformed; with collect, (null-key record indexes, timestamps)."},
    {"check_client_batch", check_client_batch, METH_VARARGS,
     "check_client_batch(data, max_size): the header fields of the one common producer batch filling "
     "data, checked as the leader checks it but for its CRC, or None."},
    {"append_record", append_record, METH_VARARGS,
     "append_record(buf, offset_delta, timestamp_delta, key, value, headers): one record appended to "
     "the bytearray buf as BatchBuilder.append writes it (headers already encoded)."},
    {"decode", decode, METH_VARARGS,
     "decode(data, start, end, count, base_offset, base_timestamp, log_append_time, record_type): "
     "the records of a records section, or None if it is malformed or holds values past 64 bits."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_records", NULL, -1, methods};

PyMODINIT_FUNC PyInit__records(void) { return PyModule_Create(&module); }
