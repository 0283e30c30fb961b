/*
 * storage._crecords: the per-record loops of the KRaft commit path, compiled.
 *
 * Four functions, each the exact counterpart of a pure-Python loop in storage/records.py
 * (which stays the reference, and the path taken when this module is not built or
 * KWIRE_PURE_PYTHON=1 is set):
 *
 *   values(records_section, count) -> list[bytes | None]
 *       Each record's value of an uncompressed record batch v2's records section
 *       (DefaultRecord: length varint, attributes int8, timestamp delta varlong, offset
 *       delta varint, key length varint and key, value length varint and value, headers),
 *       as RecordBatch.iter_values yields them. Raises ValueError for anything the fast
 *       reader does not accept: the caller then runs the Python reader, which raises
 *       Kafka's error for the record (InvalidRecordError), so both paths fail alike.
 *
 *   selected_values(records_section, count, wanted) -> list[tuple[int, bytes]]
 *       values()' reading, keeping only (index, value) of the records whose value is at least
 *       two bytes long and whose second byte -- a metadata record's type, after its frame
 *       version -- b has wanted[b] != 0 (wanted: 256 bytes); the others are not copied. As
 *       RecordBatch.iter_selected_values yields them.
 *
 *   check(records_section, count, max_offset_delta) -> None
 *       RecordBatch.validate_records' loop: every record of a (decompressed) records section
 *       parses as read_record requires and lies within the batch; ValueError otherwise (the
 *       Python reader then names the fault).
 *
 *   keyless_records(values) -> bytes
 *       The records section of a batch of keyless records with these non-empty values at
 *       offset deltas 0, 1, ..., timestamp delta 0 and no headers: encode_record's bytes
 *       for each, concatenated. Raises TypeError for a value that is not bytes.
 *
 * Varints are Kafka's: unsigned LEB128 of the zig-zag encoding ((n << 1) ^ (n >> 31)),
 * at most 5 bytes for an int32 and 10 for an int64 (ByteUtils.readVarint/readVarlong).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* One varint of at most max_bytes (5: an int32, 10: an int64) at *pos, zig-zag decoded; 0 on
 * success, -1 when it runs past the end, is longer than max_bytes or its value does not fit. */
static int
read_zigzag(const unsigned char *data, Py_ssize_t size, Py_ssize_t *pos, int max_bytes,
            int64_t *out)
{
    uint64_t raw = 0;
    int shift = 0;
    /* the last byte may only fill what is left of 32 (varint) or 64 (varlong) bits: beyond
     * that the value is out of range, as the Python reader says */
    const int bits = max_bytes == 5 ? 32 : 64;
    for (int i = 0; i < max_bytes; i++) {
        if (*pos >= size) {
            return -1;
        }
        unsigned char b = data[(*pos)++];
        if (shift + 7 > bits && ((b & 0x7F) >> (bits - shift)) != 0) {
            return -1;
        }
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *out = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 0;
        }
        shift += 7;
    }
    return -1;
}

static PyObject *
fail(PyObject *list, Py_buffer *view, const char *what)
{
    Py_XDECREF(list);
    PyBuffer_Release(view);
    PyErr_SetString(PyExc_ValueError, what);
    return NULL;
}

/* The loop of values() and selected_values(): with wanted NULL, a list of count entries (each
 * record's value, None when null); else a list of (index, value) for the records whose value
 * is at least 2 bytes long and whose second byte b has wanted[b] != 0 -- the others are parsed
 * but not copied. */
static PyObject *
read_values(Py_buffer *view, Py_ssize_t count, const unsigned char *wanted)
{
    if (count < 0) {
        return fail(NULL, view, "negative record count");
    }
    const unsigned char *data = (const unsigned char *)view->buf;
    Py_ssize_t size = view->len;
    /* each record takes at least 7 bytes: a count beyond that cannot be right */
    if (count > size / 7 + 1) {
        return fail(NULL, view, "more records than bytes");
    }
    PyObject *list = PyList_New(wanted == NULL ? count : 0);
    if (list == NULL) {
        PyBuffer_Release(view);
        return NULL;
    }
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t body_size, ignored, key_size, value_size;
        if (read_zigzag(data, size, &pos, 5, &body_size) < 0) {
            return fail(list, view, "record length");
        }
        if (body_size < 0 || body_size > size - pos) {
            return fail(list, view, "record size");
        }
        Py_ssize_t end = pos + (Py_ssize_t)body_size;
        pos += 1; /* attributes */
        if (read_zigzag(data, end, &pos, 10, &ignored) < 0 /* timestamp delta */
            || read_zigzag(data, end, &pos, 5, &ignored) < 0 /* offset delta */
            || read_zigzag(data, end, &pos, 5, &key_size) < 0) {
            return fail(list, view, "record header");
        }
        if (key_size > 0) {
            if (key_size > end - pos) {
                return fail(list, view, "key");
            }
            pos += (Py_ssize_t)key_size;
        }
        if (read_zigzag(data, end, &pos, 5, &value_size) < 0) {
            return fail(list, view, "value length");
        }
        if (value_size > end - pos) {
            return fail(list, view, "value");
        }
        if (wanted == NULL) {
            PyObject *value = value_size < 0
                ? Py_NewRef(Py_None)
                : PyBytes_FromStringAndSize((const char *)data + pos, (Py_ssize_t)value_size);
            if (value == NULL) {
                Py_DECREF(list);
                PyBuffer_Release(view);
                return NULL;
            }
            PyList_SET_ITEM(list, i, value);
        } else if (value_size >= 2 && wanted[data[pos + 1]]) {
            PyObject *pair = Py_BuildValue("(ny#)", i, (const char *)data + pos, (Py_ssize_t)value_size);
            if (pair == NULL || PyList_Append(list, pair) < 0) {
                Py_XDECREF(pair);
                Py_DECREF(list);
                PyBuffer_Release(view);
                return NULL;
            }
            Py_DECREF(pair);
        }
        pos = end;
    }
    PyBuffer_Release(view);
    return list;
}

static PyObject *
crecords_values(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n:values", &view, &count)) {
        return NULL;
    }
    return read_values(&view, count, NULL);
}

static PyObject *
crecords_selected_values(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    const char *wanted;
    Py_ssize_t wanted_size;
    if (!PyArg_ParseTuple(args, "y*ny#:selected_values", &view, &count, &wanted, &wanted_size)) {
        return NULL;
    }
    if (wanted_size != 256) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "selected_values: wanted must be 256 bytes");
        return NULL;
    }
    return read_values(&view, count, (const unsigned char *)wanted);
}

/* A nullable length (-1: null) at *pos and the bytes it counts, before end: 0 when both are
 * there (*pos past them), -1 when the length does not read, -2 when the bytes run past end. */
static int
skip_nullable(const unsigned char *data, Py_ssize_t end, Py_ssize_t *pos)
{
    int64_t length;
    if (read_zigzag(data, end, pos, 5, &length) < 0) {
        return -1;
    }
    if (length >= 0) {
        if (length > end - *pos) {
            return -2;
        }
        *pos += (Py_ssize_t)length;
    }
    return 0;
}

/* check(records_section, count, max_offset_delta): None when the section holds exactly count
 * records that DefaultRecord.readFrom accepts (the rules of storage.records.read_record: a
 * record's fields within its length, a key, value or header value of length -1 null, header
 * counts and header key lengths not negative, nothing left after its headers) each at an offset
 * delta from 0 to max_offset_delta, and nothing after the last; ValueError naming the first
 * rule broken otherwise. The deep replica audit's per-record loop. */
static PyObject *
crecords_check(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    long long max_delta;
    if (!PyArg_ParseTuple(args, "y*nL:check", &view, &count, &max_delta)) {
        return NULL;
    }
    if (count < 0) {
        return fail(NULL, &view, "negative record count");
    }
    const unsigned char *data = (const unsigned char *)view.buf;
    Py_ssize_t size = view.len;
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t body_size, ignored, offset_delta, length, headers;
        if (read_zigzag(data, size, &pos, 5, &body_size) < 0) {
            return fail(NULL, &view, "record length");
        }
        if (body_size < 0 || body_size > size - pos) {
            return fail(NULL, &view, "record size");
        }
        Py_ssize_t end = pos + (Py_ssize_t)body_size;
        if (pos >= end) {
            return fail(NULL, &view, "attributes");
        }
        pos += 1;
        if (read_zigzag(data, end, &pos, 10, &ignored) < 0 /* timestamp delta */
            || read_zigzag(data, end, &pos, 5, &offset_delta) < 0) {
            return fail(NULL, &view, "record header");
        }
        if (offset_delta < 0 || offset_delta > max_delta) {
            return fail(NULL, &view, "offset delta outside the batch");
        }
        for (int field = 0; field < 2; field++) { /* key, value */
            int skipped = skip_nullable(data, end, &pos);
            if (skipped < 0) {
                return fail(NULL, &view, skipped == -1 ? "key or value length" : "key or value past the record");
            }
        }
        if (read_zigzag(data, end, &pos, 5, &headers) < 0 || headers < 0 || headers > end - pos) {
            return fail(NULL, &view, "header count");
        }
        for (int64_t h = 0; h < headers; h++) {
            if (read_zigzag(data, end, &pos, 5, &length) < 0 || length < 0 || length > end - pos) {
                return fail(NULL, &view, "header key");
            }
            pos += (Py_ssize_t)length;
            int skipped = skip_nullable(data, end, &pos);
            if (skipped < 0) {
                return fail(NULL, &view, skipped == -1 ? "header value length" : "header value past the record");
            }
        }
        if (pos != end) {
            return fail(NULL, &view, "record length does not match its fields");
        }
    }
    if (pos != size) {
        return fail(NULL, &view, "bytes after the last record");
    }
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

/* Writes the zig-zag varint of a non-negative int32 n at out; returns its length. */
static Py_ssize_t
write_zigzag(unsigned char *out, uint32_t n)
{
    uint32_t raw = n << 1;
    Py_ssize_t len = 0;
    while (raw >= 0x80) {
        out[len++] = (unsigned char)(raw | 0x80);
        raw >>= 7;
    }
    out[len++] = (unsigned char)raw;
    return len;
}

static PyObject *
crecords_keyless_records(PyObject *module, PyObject *values)
{
    PyObject *seq = PySequence_Fast(values, "values must be a sequence");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    /* the worst case per record: length 5, attributes 1, timestamp 1, offset 5, key 1,
     * value length 5, headers 1 */
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(items[i])) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "values must be bytes");
            return NULL;
        }
        Py_ssize_t len = PyBytes_GET_SIZE(items[i]);
        if (len > INT32_MAX / 2 - 32 || total > PY_SSIZE_T_MAX - len - 19) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_OverflowError, "records too large");
            return NULL;
        }
        total += len + 19;
    }
    if (n > INT32_MAX / 2) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_OverflowError, "too many records");
        return NULL;
    }
    PyObject *result = PyBytes_FromStringAndSize(NULL, total);
    if (result == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(result);
    Py_ssize_t pos = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t len = PyBytes_GET_SIZE(items[i]);
        unsigned char head[16];
        Py_ssize_t h = 0;
        head[h++] = 0; /* attributes */
        head[h++] = 0; /* timestamp delta 0 */
        h += write_zigzag(head + h, (uint32_t)i); /* offset delta */
        head[h++] = 1; /* key length -1 */
        h += write_zigzag(head + h, (uint32_t)len); /* value length */
        pos += write_zigzag(out + pos, (uint32_t)(h + len + 1)); /* record length */
        memcpy(out + pos, head, (size_t)h);
        pos += h;
        memcpy(out + pos, PyBytes_AS_STRING(items[i]), (size_t)len);
        pos += len;
        out[pos++] = 0; /* no headers */
    }
    Py_DECREF(seq);
    if (_PyBytes_Resize(&result, pos) < 0) {
        return NULL;
    }
    return result;
}

static PyMethodDef crecords_methods[] = {
    {"values", crecords_values, METH_VARARGS,
     "values(records_section, count) -> list of each record's value (None when null); "
     "ValueError for records the fast reader does not accept."},
    {"selected_values", crecords_selected_values, METH_VARARGS,
     "selected_values(records_section, count, wanted) -> list of (index, value) for each record "
     "whose value is 2 bytes or longer and whose second byte b has wanted[b] != 0 (wanted: 256 "
     "bytes); ValueError as values()."},
    {"check", crecords_check, METH_VARARGS,
     "check(records_section, count, max_offset_delta) -> None when every record parses as "
     "DefaultRecord.readFrom would and lies within the batch; ValueError naming the first fault."},
    {"keyless_records", crecords_keyless_records, METH_O,
     "keyless_records(values) -> the records section of keyless records with these values at "
     "offset deltas 0.., timestamp delta 0, no headers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef crecords_module = {
    PyModuleDef_HEAD_INIT, "storage._crecords",
    "The per-record loops of the KRaft commit path, compiled (see storage.records).", -1,
    crecords_methods,
};

PyMODINIT_FUNC
PyInit__crecords(void)
{
    return PyModule_Create(&crecords_module);
}
