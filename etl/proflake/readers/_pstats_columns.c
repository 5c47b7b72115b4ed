/*
 * Decode a cProfile dump (marshal bytes of the pstats dictionary) straight into columns.
 *
 * marshal.loads builds a Python object for every key, count, time and caller edge, and the reader then
 * takes those objects apart again into columns: together ~0.6 ms for a dump of ~260 functions, most of
 * an ingest's parse time. This reads the marshal stream once and writes counts and times into flat
 * buffers; the only objects it makes are the function keys, once per key the stream spells out (the
 * rest of a dump's keys are back-references to those).
 *
 * It is a fast path with one rule: it either returns exactly the columns the Python reader would build
 * for these bytes, or returns None ("not the common shape") and the Python reader decides. So it accepts
 * only the shape cProfile writes -- {(str, int, str): (int, int, float, float, {(str, int, str): (int,
 * int, float, float)})} with counts in [0, 2**63-1] and finite times below 2**63 -- and declines
 * everything else: other types, text floats, latin-1 "ASCII" strings, lone surrogates, references it
 * cannot resolve, truncated data. Duplicate keys (a dict keeps the last) are checked by the caller.
 *
 * The marshal format is CPython's Python/marshal.c (versions 2-4, the ones Python 3 writes). A type
 * byte with FLAG_REF (0x80) adds the object to a table that TYPE_REF ('r', a 4-byte index) points
 * back into; a tuple or dict takes its slot before its items are read.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#define FLAG_REF 0x80
#define TYPE_NULL '0'
#define TYPE_INT 'i'
#define TYPE_LONG 'l'
#define TYPE_BINARY_FLOAT 'g'
#define TYPE_TUPLE '('
#define TYPE_SMALL_TUPLE ')'
#define TYPE_DICT '{'
#define TYPE_REF 'r'
#define TYPE_UNICODE 'u'
#define TYPE_INTERNED 't'
#define TYPE_ASCII 'a'
#define TYPE_ASCII_INTERNED 'A'
#define TYPE_SHORT_ASCII 'z'
#define TYPE_SHORT_ASCII_INTERNED 'Z'

/* What a reference slot holds: only the objects a pstats dump shares are of use. REF_BUILDING: a
 * tuple whose items are still being read. */
enum ref_kind { REF_UNUSABLE, REF_BUILDING, REF_STR, REF_INT, REF_FLOAT, REF_KEY };

typedef struct {
    enum ref_kind kind;
    PyObject *str; /* REF_STR: owned */
    int64_t integer;
    double real;
    Py_ssize_t key; /* REF_KEY: index into the keys list */
} Ref;

typedef struct {
    int64_t *data;
    Py_ssize_t size, capacity;
} Ints;

typedef struct {
    double *data;
    Py_ssize_t size, capacity;
} Reals;

/* FAILED: a Python exception is set (out of memory). CYCLE: a reference to a tuple from inside itself,
 * which no pstats dump holds and on which marshal.loads can crash (hashing a key that contains itself
 * recurses until the C stack overflows), so it is refused here, not declined. CODE: a code object,
 * which no pstats dump holds either and which marshal.loads builds unchecked (a garbled one crashes
 * it): refused too. */
enum { DECLINE = -1, FAILED = -2, CYCLE = -3, CODE = -5 };

typedef struct {
    const unsigned char *at, *end;
    Ref *refs;
    Py_ssize_t ref_count, ref_capacity;
    PyObject *keys; /* list of (filename, lineno, function_name), one per key spelled out */
    PyObject *known; /* dict: key -> its row in the reader's known keys */
    Ints key_row;    /* per key spelled out: its row in known, or -1 */
    Ints function_key, primitive_calls, total_calls;
    Reals own_time, cumulative_time;
    Ints callee_key, caller_key, edge_total_calls, edge_primitive_calls;
    Reals edge_own_time, edge_cumulative_time;
} Decoder;

static int grow(void **data, Py_ssize_t *capacity, Py_ssize_t item_size) {
    Py_ssize_t wanted = *capacity ? *capacity * 2 : 256;
    void *bigger = PyMem_Realloc(*data, (size_t)(wanted * item_size));
    if (bigger == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    *data = bigger;
    *capacity = wanted;
    return 0;
}

static int push_int(Ints *column, int64_t value) {
    if (column->size == column->capacity && grow((void **)&column->data, &column->capacity, sizeof(int64_t)))
        return FAILED;
    column->data[column->size++] = value;
    return 0;
}

static int push_real(Reals *column, double value) {
    if (column->size == column->capacity && grow((void **)&column->data, &column->capacity, sizeof(double)))
        return FAILED;
    column->data[column->size++] = value;
    return 0;
}

/* A new reference slot; its index, or a negative status. */
static Py_ssize_t add_ref(Decoder *d, enum ref_kind kind) {
    if (d->ref_count == d->ref_capacity && grow((void **)&d->refs, &d->ref_capacity, sizeof(Ref)))
        return FAILED;
    Ref *ref = &d->refs[d->ref_count];
    memset(ref, 0, sizeof(Ref));
    ref->kind = kind;
    return d->ref_count++;
}

static int read_byte(Decoder *d, int *value) {
    if (d->at >= d->end)
        return DECLINE;
    *value = *d->at++;
    return 0;
}

/* A type byte: the type, and whether it carries FLAG_REF. */
static int read_type(Decoder *d, int *type, int *flag) {
    if (read_byte(d, type))
        return DECLINE;
    *flag = *type & FLAG_REF;
    *type &= ~FLAG_REF;
    return 0;
}

/* A little-endian 4-byte int at *at, if the data holds one; the decoder's and the walk's. */
static int int32_at(const unsigned char **at, const unsigned char *end, int32_t *value) {
    if (end - *at < 4)
        return -1;
    const unsigned char *b = *at;
    *value = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
    *at += 4;
    return 0;
}

static int read_int32(Decoder *d, int32_t *value) {
    return int32_at(&d->at, d->end, value) ? DECLINE : 0;
}

/* A TYPE_REF's slot, if it holds the wanted kind. */
static int referenced(Decoder *d, enum ref_kind kind, Ref **ref) {
    int32_t index;
    if (read_int32(d, &index) || index < 0 || index >= d->ref_count)
        return DECLINE;
    if (d->refs[index].kind == REF_BUILDING)
        return CYCLE;
    if (d->refs[index].kind != kind)
        return DECLINE;
    *ref = &d->refs[index];
    return 0;
}

/* A tuple is read: references to it are no longer cycles. */
static void finish(Decoder *d, Py_ssize_t slot) {
    if (slot >= 0 && d->refs[slot].kind == REF_BUILDING)
        d->refs[slot].kind = REF_UNUSABLE;
}

/* A str: a new reference in *out. */
static int read_str(Decoder *d, PyObject **out) {
    int type, flag;
    if (read_type(d, &type, &flag))
        return DECLINE;
    if (type == TYPE_REF) {
        Ref *ref;
        int status = referenced(d, REF_STR, &ref);
        if (status)
            return status;
        Py_INCREF(ref->str);
        *out = ref->str;
        return 0;
    }
    Py_ssize_t size;
    int ascii = type != TYPE_UNICODE && type != TYPE_INTERNED;
    if (type == TYPE_SHORT_ASCII || type == TYPE_SHORT_ASCII_INTERNED) {
        int byte;
        if (read_byte(d, &byte))
            return DECLINE;
        size = byte;
    } else if (type == TYPE_ASCII || type == TYPE_ASCII_INTERNED || !ascii) {
        int32_t n;
        if (read_int32(d, &n) || n < 0)
            return DECLINE;
        size = n;
    } else {
        return DECLINE;
    }
    if (d->end - d->at < size)
        return DECLINE;
    PyObject *text;
    if (ascii) {
        /* marshal.loads makes latin-1 text of bytes above 127 here; such crafted dumps go the slow way. */
        for (Py_ssize_t i = 0; i < size; i++)
            if (d->at[i] > 127)
                return DECLINE;
        text = PyUnicode_New(size, 127);
        if (text == NULL)
            return FAILED;
        memcpy(PyUnicode_DATA(text), d->at, (size_t)size);
    } else {
        /* Strict, where marshal.loads passes surrogates: text that cannot be UTF-8 again is declined. */
        text = PyUnicode_DecodeUTF8((const char *)d->at, size, NULL);
        if (text == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
                return FAILED;
            PyErr_Clear();
            return DECLINE;
        }
    }
    d->at += size;
    if (flag) {
        Py_ssize_t slot = add_ref(d, REF_STR);
        if (slot < 0) {
            Py_DECREF(text);
            return FAILED;
        }
        Py_INCREF(text);
        d->refs[slot].str = text;
    }
    *out = text;
    return 0;
}

/* A count or line number: an int in [0, 2**63-1]. */
static int read_count(Decoder *d, int64_t *out) {
    int type, flag;
    if (read_type(d, &type, &flag))
        return DECLINE;
    int64_t value;
    if (type == TYPE_REF) {
        Ref *ref;
        int status = referenced(d, REF_INT, &ref);
        if (status)
            return status;
        *out = ref->integer;
        return 0;
    } else if (type == TYPE_INT) {
        int32_t n;
        if (read_int32(d, &n) || n < 0)
            return DECLINE;
        value = n;
    } else if (type == TYPE_LONG) {
        /* Sign and number of 15-bit digits, then the digits, least significant first. */
        int32_t digits;
        if (read_int32(d, &digits) || digits < 0 || digits > 5 || d->end - d->at < 2 * (Py_ssize_t)digits)
            return DECLINE;
        uint64_t magnitude = 0;
        for (int i = digits - 1; i >= 0; i--) {
            unsigned digit = d->at[2 * i] | (unsigned)d->at[2 * i + 1] << 8;
            if (digit >= 1u << 15 || (i == digits - 1 && digit == 0)) /* marshal.loads refuses these */
                return DECLINE;
            if (magnitude > (UINT64_MAX >> 15))
                return DECLINE;
            magnitude = magnitude << 15 | digit;
        }
        if (magnitude > (uint64_t)INT64_MAX)
            return DECLINE;
        d->at += 2 * (Py_ssize_t)digits;
        value = (int64_t)magnitude;
    } else {
        return DECLINE; /* bools, floats and the rest: exact ints only, as the Python reader checks */
    }
    if (flag) {
        Py_ssize_t slot = add_ref(d, REF_INT);
        if (slot < 0)
            return FAILED;
        d->refs[slot].integer = value;
    }
    *out = value;
    return 0;
}

/* A time: a finite float below 2**63 in size (int times are left to the Python reader). */
static int read_time(Decoder *d, double *out) {
    int type, flag;
    if (read_type(d, &type, &flag))
        return DECLINE;
    double value;
    if (type == TYPE_REF) {
        Ref *ref;
        int status = referenced(d, REF_FLOAT, &ref);
        if (status)
            return status;
        *out = ref->real;
        return 0;
    }
    if (type != TYPE_BINARY_FLOAT || d->end - d->at < 8)
        return DECLINE;
    unsigned char bytes[8];
#if PY_LITTLE_ENDIAN
    memcpy(bytes, d->at, 8);
#else
    for (int i = 0; i < 8; i++)
        bytes[i] = d->at[7 - i];
#endif
    memcpy(&value, bytes, 8);
    d->at += 8;
    if (!isfinite(value) || fabs(value) >= 9223372036854775808.0)
        return DECLINE;
    if (flag) {
        Py_ssize_t slot = add_ref(d, REF_FLOAT);
        if (slot < 0)
            return FAILED;
        d->refs[slot].real = value;
    }
    *out = value;
    return 0;
}

/* The header of a tuple of ``size`` items; its reference slot, if flagged, is *slot (else -1). */
static int read_tuple_header(Decoder *d, Py_ssize_t size, Py_ssize_t *slot) {
    int type, flag;
    if (read_type(d, &type, &flag))
        return DECLINE;
    Py_ssize_t n;
    if (type == TYPE_SMALL_TUPLE) {
        int byte;
        if (read_byte(d, &byte))
            return DECLINE;
        n = byte;
    } else if (type == TYPE_TUPLE) {
        int32_t count;
        if (read_int32(d, &count))
            return DECLINE;
        n = count;
    } else {
        return DECLINE;
    }
    if (n != size)
        return DECLINE;
    *slot = -1;
    if (flag && (*slot = add_ref(d, REF_BUILDING)) < 0)
        return FAILED;
    return 0;
}

/* A function key (filename, lineno, function_name), or a reference to one; its index in d->keys. */
static int read_key(Decoder *d, Py_ssize_t *key) {
    if (d->at < d->end && (*d->at & ~FLAG_REF) == TYPE_REF) {
        d->at++;
        Ref *ref;
        int status = referenced(d, REF_KEY, &ref);
        if (status)
            return status;
        *key = ref->key;
        return 0;
    }
    Py_ssize_t slot;
    int status = read_tuple_header(d, 3, &slot);
    if (status)
        return status;
    PyObject *filename = NULL, *function_name = NULL, *lineno = NULL, *tuple = NULL;
    int64_t line;
    if ((status = read_str(d, &filename)) || (status = read_count(d, &line)) ||
        (status = read_str(d, &function_name)))
        goto done;
    status = FAILED;
    if ((lineno = PyLong_FromLongLong(line)) == NULL)
        goto done;
    if ((tuple = PyTuple_Pack(3, filename, lineno, function_name)) == NULL)
        goto done;
    if (PyList_Append(d->keys, tuple))
        goto done;
    PyObject *row = PyDict_GetItemWithError(d->known, tuple); /* borrowed */
    if (row == NULL && PyErr_Occurred())
        goto done;
    int64_t known_row = row != NULL && PyLong_CheckExact(row) ? PyLong_AsLongLong(row) : -1;
    if (known_row == -1 && PyErr_Occurred())
        goto done;
    if (push_int(&d->key_row, known_row))
        goto done;
    *key = PyList_GET_SIZE(d->keys) - 1;
    if (slot >= 0) {
        d->refs[slot].kind = REF_KEY;
        d->refs[slot].key = *key;
    }
    status = 0;
done:
    Py_XDECREF(filename);
    Py_XDECREF(function_name);
    Py_XDECREF(lineno);
    Py_XDECREF(tuple);
    return status;
}

static int read_dict_header(Decoder *d, Py_ssize_t *slot) {
    int type;
    if (read_byte(d, &type) || (type & ~FLAG_REF) != TYPE_DICT)
        return DECLINE;
    *slot = -1;
    if ((type & FLAG_REF) && (*slot = add_ref(d, REF_UNUSABLE)) < 0) /* no dict is hashed: no crash */
        return FAILED;
    return 0;
}

/* True at the end of a dict (and consumes the marker). */
static int at_dict_end(Decoder *d) {
    if (d->at < d->end && *d->at == TYPE_NULL) {
        d->at++;
        return 1;
    }
    return 0;
}

#define TRY(call)               \
    do {                        \
        int status_ = (call);   \
        if (status_)            \
            return status_;     \
    } while (0)

static int read_callers(Decoder *d, int64_t callee) {
    Py_ssize_t callers;
    TRY(read_dict_header(d, &callers));
    while (!at_dict_end(d)) {
        Py_ssize_t caller, slot;
        int64_t total_calls, primitive_calls;
        double own_time, cumulative_time;
        TRY(read_key(d, &caller));
        TRY(read_tuple_header(d, 4, &slot)); /* pstats keeps (nc, cc, tt, ct) per caller */
        TRY(read_count(d, &total_calls));
        TRY(read_count(d, &primitive_calls));
        TRY(read_time(d, &own_time));
        TRY(read_time(d, &cumulative_time));
        TRY(push_int(&d->callee_key, callee));
        TRY(push_int(&d->caller_key, caller));
        TRY(push_int(&d->edge_total_calls, total_calls));
        TRY(push_int(&d->edge_primitive_calls, primitive_calls));
        TRY(push_real(&d->edge_own_time, own_time));
        TRY(push_real(&d->edge_cumulative_time, cumulative_time));
        finish(d, slot);
    }
    finish(d, callers);
    return 0;
}

static int read_stats(Decoder *d) {
    Py_ssize_t stats;
    TRY(read_dict_header(d, &stats));
    while (!at_dict_end(d)) {
        Py_ssize_t function, slot;
        int64_t primitive_calls, total_calls;
        double own_time, cumulative_time;
        TRY(read_key(d, &function));
        TRY(read_tuple_header(d, 5, &slot)); /* (cc, nc, tt, ct, callers) */
        TRY(read_count(d, &primitive_calls));
        TRY(read_count(d, &total_calls));
        TRY(read_time(d, &own_time));
        TRY(read_time(d, &cumulative_time));
        TRY(push_int(&d->function_key, function));
        TRY(push_int(&d->primitive_calls, primitive_calls));
        TRY(push_int(&d->total_calls, total_calls));
        TRY(push_real(&d->own_time, own_time));
        TRY(push_real(&d->cumulative_time, cumulative_time));
        TRY(read_callers(d, function));
        finish(d, slot);
    }
    finish(d, stats);
    return 0;
}

/* -- the cycle check ----------------------------------------------------------------------------
 * When the decoder declines, marshal.loads reads the dump. It crashes the process on a tuple that holds
 * a reference to itself (hashing it recurses until the C stack overflows; marshal.loads hashes every
 * dict key), and on a garbled code object: the walk below reads any marshal stream of plain values and
 * finds either first. It gives up (GIVE_UP: marshal.loads decides, and refuses) on what is cut short or
 * not a value at all. etl/proflake/readers/marshal_guard.py is the same walk in Python (a stack for the recursion). */
#define GIVE_UP (-4)
#define MAX_DEPTH 2000 /* marshal.loads refuses deeper nesting itself */

typedef struct {
    const unsigned char *at, *end;
    unsigned char *building; /* per reference slot: a tuple still being read */
    Py_ssize_t count, capacity;
} Walk;

static int walk_skip(Walk *w, Py_ssize_t size) {
    if (size < 0 || w->end - w->at < size)
        return GIVE_UP;
    w->at += size;
    return 0;
}

static int walk_int32(Walk *w, int32_t *value) {
    return int32_at(&w->at, w->end, value) ? GIVE_UP : 0;
}

static Py_ssize_t walk_slot(Walk *w, int building) {
    if (w->count == w->capacity) {
        Py_ssize_t wanted = w->capacity ? w->capacity * 2 : 256;
        unsigned char *bigger = PyMem_Realloc(w->building, (size_t)wanted);
        if (bigger == NULL) {
            PyErr_NoMemory();
            return FAILED;
        }
        w->building = bigger;
        w->capacity = wanted;
    }
    w->building[w->count] = (unsigned char)building;
    return w->count++;
}

static int walk(Walk *w, int depth) {
    if (depth > MAX_DEPTH || w->at >= w->end)
        return GIVE_UP;
    int type = *w->at++;
    int flag = type & FLAG_REF;
    type &= ~FLAG_REF;
    int32_t n;
    int status;
    switch (type) {
    case 'N': case 'F': case 'T': case 'S': case '.': /* None, False, True, StopIteration, Ellipsis */
        return 0; /* marshal.loads gives these no reference slot, even with FLAG_REF: neither may the walk,
                   * or every later slot is one off and a cycle goes unseen (a 13-byte dump crashed it) */
    case TYPE_NULL:
        return GIVE_UP; /* only a dict's end, handled there */
    case TYPE_INT:
        if ((status = walk_skip(w, 4)))
            return status;
        break;
    case TYPE_BINARY_FLOAT:
        if ((status = walk_skip(w, 8)))
            return status;
        break;
    case 'y': /* binary complex */
        if ((status = walk_skip(w, 16)))
            return status;
        break;
    case 'f': /* text float */
        if (w->at >= w->end || (status = walk_skip(w, 1 + *w->at)))
            return GIVE_UP;
        break;
    case 'x': /* text complex */
        for (int part = 0; part < 2; part++)
            if (w->at >= w->end || walk_skip(w, 1 + *w->at))
                return GIVE_UP;
        break;
    case TYPE_LONG:
        if ((status = walk_int32(w, &n)) || n == INT32_MIN || (status = walk_skip(w, 2 * (Py_ssize_t)abs(n))))
            return GIVE_UP;
        break;
    case TYPE_SHORT_ASCII: case TYPE_SHORT_ASCII_INTERNED:
        if (w->at >= w->end || walk_skip(w, 1 + *w->at))
            return GIVE_UP;
        break;
    case 's': case TYPE_ASCII: case TYPE_ASCII_INTERNED: case TYPE_UNICODE: case TYPE_INTERNED:
        if ((status = walk_int32(w, &n)) || (status = walk_skip(w, n)))
            return GIVE_UP;
        break;
    case TYPE_REF:
        if ((status = walk_int32(w, &n)) || n < 0 || n >= w->count)
            return GIVE_UP;
        return w->building[n] ? CYCLE : 0;
    case TYPE_SMALL_TUPLE: case TYPE_TUPLE: case '[': case '<': case '>': { /* tuple, list, set, frozenset */
        if (type == TYPE_SMALL_TUPLE) {
            if (w->at >= w->end)
                return GIVE_UP;
            n = *w->at++;
        } else if ((status = walk_int32(w, &n)) || n < 0) {
            return GIVE_UP;
        }
        int tuple = type == TYPE_SMALL_TUPLE || type == TYPE_TUPLE;
        Py_ssize_t slot = -1;
        if (flag && (slot = walk_slot(w, tuple)) < 0)
            return FAILED;
        for (int32_t i = 0; i < n; i++)
            if ((status = walk(w, depth + 1)))
                return status;
        if (slot >= 0)
            w->building[slot] = 0;
        return 0;
    }
    case TYPE_DICT: {
        Py_ssize_t slot = -1;
        if (flag && (slot = walk_slot(w, 0)) < 0)
            return FAILED;
        /* marshal.loads ends a dict at a NULL where a key or a value would be (and drops that key) */
        while (w->at < w->end && *w->at != TYPE_NULL)
            if ((status = walk(w, depth + 1)))
                return status;
        if ((status = walk_skip(w, 1)))
            return status;
        return 0;
    }
    case 'c':
        return CODE;
    default:
        return GIVE_UP; /* unknown type codes: marshal.loads refuses them */
    }
    if (flag && walk_slot(w, 0) < 0)
        return FAILED;
    return 0;
}

/* CYCLE, CODE, FAILED, or 0 (none found, or gave up). */
static int find_cycle(const unsigned char *data, Py_ssize_t size) {
    Walk w = {data, data + size, NULL, 0, 0};
    int status = walk(&w, 0);
    PyMem_Free(w.building);
    return status == CYCLE || status == CODE || status == FAILED ? status : 0;
}

/* Sets ValueError for what marshal.loads must not read; 0 when it may. */
static int refuse(int status) {
    if (status == CYCLE)
        PyErr_SetString(PyExc_ValueError, "marshal data refers to a tuple from inside itself");
    else if (status == CODE)
        PyErr_SetString(PyExc_ValueError, "marshal data holds a code object");
    return status == CYCLE || status == CODE || status == FAILED ? -1 : 0;
}

/* Bytes of the columns laid end to end. */
static PyObject *joined(const void *columns[], const Py_ssize_t sizes[], int count, Py_ssize_t item_size) {
    Py_ssize_t total = 0;
    for (int i = 0; i < count; i++)
        total += sizes[i];
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, total * item_size);
    if (bytes == NULL)
        return NULL;
    char *at = PyBytes_AS_STRING(bytes);
    for (int i = 0; i < count; i++) {
        if (sizes[i])
            memcpy(at, columns[i], (size_t)(sizes[i] * item_size));
        at += sizes[i] * item_size;
    }
    return bytes;
}

static void release(Decoder *d) {
    for (Py_ssize_t i = 0; i < d->ref_count; i++)
        Py_XDECREF(d->refs[i].str);
    PyMem_Free(d->refs);
    Ints *ints[] = {&d->function_key, &d->primitive_calls, &d->total_calls, &d->callee_key, &d->caller_key,
                    &d->edge_total_calls, &d->edge_primitive_calls, &d->key_row};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        PyMem_Free(ints[i]->data);
    Reals *reals[] = {&d->own_time, &d->cumulative_time, &d->edge_own_time, &d->edge_cumulative_time};
    for (size_t i = 0; i < sizeof reals / sizeof *reals; i++)
        PyMem_Free(reals[i]->data);
    Py_XDECREF(d->keys);
}

PyDoc_STRVAR(decode_doc,
"decode(data, known) -> (keys, function_keys, callee_keys, caller_keys, counts, times, key_rows) or None\n\n"
"keys: the function keys the dump spells out, as (filename, lineno, function_name) tuples;\n"
"key_rows: int64 bytes, each of those keys' value in the dict known, or -1 where it has none;\n"
"function_keys, callee_keys, caller_keys: int64 bytes, indexes into keys, one per function / caller edge;\n"
"counts: int64 bytes, primitive calls and total calls per function, then total calls and primitive\n"
"calls per edge; times: float64 bytes, own and cumulative time per function, then per edge.\n"
"None when the dump is not the common shape; the Python reader then decides.\n"
"ValueError for a reference to a tuple from inside itself or a code object, which marshal.loads may\n"
"crash on.");

PyDoc_STRVAR(check_doc,
"check(data) -> None\n\n"
"ValueError when marshal.loads could crash the process on data (see decode); None when it may read it.");

static PyObject *check(PyObject *module, PyObject *data) {
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE))
        return NULL;
    int status = find_cycle(view.buf, view.len);
    PyBuffer_Release(&view);
    return refuse(status) ? NULL : Py_NewRef(Py_None);
}

static PyObject *decode(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *data, *known;
    if (!PyArg_ParseTuple(args, "OO!:decode", &data, &PyDict_Type, &known))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE))
        return NULL;
    Decoder d;
    memset(&d, 0, sizeof d);
    d.known = known;
    d.at = view.buf;
    d.end = d.at + view.len;
    PyObject *result = NULL;
    d.keys = PyList_New(0);
    int status = d.keys == NULL ? FAILED : read_stats(&d);
    if (status == DECLINE) { /* marshal.loads will read it: not if it could crash */
        int cycle = find_cycle(view.buf, view.len);
        status = cycle ? cycle : DECLINE;
    }
    if (refuse(status))
        goto done;
    if (status == DECLINE || d.function_key.size == 0) { /* the Python reader decides */
        result = Py_NewRef(Py_None);
        goto done;
    }
    const void *counts[] = {d.primitive_calls.data, d.total_calls.data, d.edge_total_calls.data,
                            d.edge_primitive_calls.data};
    const Py_ssize_t count_sizes[] = {d.primitive_calls.size, d.total_calls.size, d.edge_total_calls.size,
                                      d.edge_primitive_calls.size};
    const void *times[] = {d.own_time.data, d.cumulative_time.data, d.edge_own_time.data,
                           d.edge_cumulative_time.data};
    const void *function_keys[] = {d.function_key.data}, *callee_keys[] = {d.callee_key.data},
               *caller_keys[] = {d.caller_key.data}, *key_rows[] = {d.key_row.data};
    PyObject *parts[] = {
        joined(function_keys, &d.function_key.size, 1, sizeof(int64_t)),
        joined(callee_keys, &d.callee_key.size, 1, sizeof(int64_t)),
        joined(caller_keys, &d.caller_key.size, 1, sizeof(int64_t)),
        joined(counts, count_sizes, 4, sizeof(int64_t)),
        joined(times, count_sizes, 4, sizeof(double)), /* the same sizes: a time per count */
        joined(key_rows, &d.key_row.size, 1, sizeof(int64_t)),
    };
    if (parts[0] && parts[1] && parts[2] && parts[3] && parts[4] && parts[5])
        result = PyTuple_Pack(7, d.keys, parts[0], parts[1], parts[2], parts[3], parts[4], parts[5]);
    for (int i = 0; i < 6; i++)
        Py_XDECREF(parts[i]);
done:
    release(&d);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"decode", decode, METH_VARARGS, decode_doc},
    {"check", check, METH_O, check_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_pstats_columns",
    "cProfile dumps decoded straight into columns (see etl/readers/cprofile.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__pstats_columns(void) {
    return PyModule_Create(&module);
}
