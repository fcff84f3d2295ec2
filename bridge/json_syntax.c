/*
 * Whether bytes are exactly one JSON value, without building it: the extension module bridge._json_syntax.
 *
 * A worker's value and output texts are embedded in envelopes as they were written, so each is first checked
 * to be one JSON value (service/runtime/json_texts.py); a worker may be owned by an attacker.  Checking by
 * parsing builds every object of the value only to free it again: ~8 ms for a 1 MiB array of objects, most
 * of a large value's time in the service.  This scan reads the bytes once, in ~1 ms, and builds nothing.
 *
 * It answers 1 only for text that RFC 8259 calls one JSON value: whitespace around one value; strings of
 * valid UTF-8 (no overlong form, no surrogate, nothing past U+10FFFF), no raw control character, only the
 * escapes JSON has, and a \u escape of a surrogate only as a high-low pair; numbers in JSON's grammar; the
 * three literals; nesting at most MAX_DEPTH deep (or a caller's lower limit).  Anything else answers 0,
 * which means "parse it to decide" (bridge/output.py), so this scan may refuse what the parser accepts,
 * never the other way round.
 *
 * With `strict` it also answers 0 for what a Python json.dumps writes of values the host would refuse or
 * write otherwise (guest_runtime/monty/values.py): an object key spelled like a number, a bool, null, NaN or
 * an infinity (json.dumps makes such keys of non-str keys), and an integer of 19 digits or more (the host
 * writes one past 64 bits as a double).  A str key that merely looks so answers 0 too.
 */
#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x030B0000
#include <Python.h>

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* Deeper text is left to the parser, which refuses past 1,024 levels. */
#define MAX_DEPTH 512
/* Integers of this many digits may be past 64 bits. */
#define LONG_INTEGER 19

typedef const unsigned char *Cursor;

static Cursor skip_space(Cursor p, Cursor end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The code unit of the four hex digits at p (p + 4 <= end), or -1. */
static long hex4(Cursor p) {
    long unit = 0;
    for (int i = 0; i < 4; i++) {
        int digit = hex_value(p[i]);
        if (digit < 0) return -1;
        unit = unit * 16 + digit;
    }
    return unit;
}

/* The end of the UTF-8 sequence that starts at p with a byte of 0x80 or more, or NULL if it is not valid. */
static Cursor utf8_sequence(Cursor p, Cursor end) {
    unsigned char c = *p;
    unsigned char low = 0x80, high = 0xBF; /* the range of the second byte */
    int more;
    if (c >= 0xC2 && c <= 0xDF) {
        more = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        more = 2;
        if (c == 0xE0) low = 0xA0;  /* no overlong form */
        if (c == 0xED) high = 0x9F; /* no surrogate */
    } else if (c >= 0xF0 && c <= 0xF4) {
        more = 3;
        if (c == 0xF0) low = 0x90;  /* no overlong form */
        if (c == 0xF4) high = 0x8F; /* nothing past U+10FFFF */
    } else {
        return NULL;
    }
    if (end - p <= more || p[1] < low || p[1] > high) return NULL;
    for (int i = 2; i <= more; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return NULL;
    return p + more + 1;
}

/* The end of the string that starts at p (at its opening quote), or NULL. */
static Cursor string_end(Cursor p, Cursor end) {
    p++;
    while (p < end) {
        unsigned char c = *p;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            p++;
        } else if (c == '"') {
            return p + 1;
        } else if (c == '\\') {
            if (end - p < 2) return NULL;
            switch (p[1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                p += 2;
                break;
            case 'u': {
                if (end - p < 6) return NULL;
                long unit = hex4(p + 2);
                if (unit < 0 || (unit >= 0xDC00 && unit <= 0xDFFF)) return NULL; /* a low half alone */
                p += 6;
                if (unit >= 0xD800 && unit <= 0xDBFF) { /* a high half: its low half must follow */
                    if (end - p < 6 || p[0] != '\\' || p[1] != 'u') return NULL;
                    long next = hex4(p + 2);
                    if (next < 0xDC00 || next > 0xDFFF) return NULL;
                    p += 6;
                }
                break;
            }
            default:
                return NULL;
            }
        } else if (c < 0x20) {
            return NULL;
        } else if ((p = utf8_sequence(p, end)) == NULL) {
            return NULL;
        }
    }
    return NULL;
}

/* The end of the number that starts at p, or NULL (also for an integer of LONG_INTEGER digits when strict). */
static Cursor number_end(Cursor p, Cursor end, bool strict) {
    if (p < end && *p == '-') p++;
    if (p >= end) return NULL;
    if (*p == '0') {
        p++;
    } else if (is_digit(*p)) {
        Cursor first = p;
        while (p < end && is_digit(*p)) p++;
        if (strict && p - first >= LONG_INTEGER) return NULL;
    } else {
        return NULL;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p)) return NULL;
        while (p < end && is_digit(*p)) p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || !is_digit(*p)) return NULL;
        while (p < end && is_digit(*p)) p++;
    }
    return p;
}

static bool spelled(Cursor p, Cursor end, const char *word) {
    size_t n = strlen(word);
    return (size_t)(end - p) == n && memcmp(p, word, n) == 0;
}

/* Whether the key whose text (between its quotes) is [p, end) may have been made of a number, a bool or None. */
static bool coerced_key(Cursor p, Cursor end) {
    if (p < end && *p == '-') p++;
    if (p < end && is_digit(*p)) return true; /* a number */
    return spelled(p, end, "Infinity") || spelled(p, end, "true") || spelled(p, end, "false") ||
           spelled(p, end, "null") || spelled(p, end, "NaN");
}

/* The end of the key string that starts at p, or NULL (also for a coerced-looking key when strict). */
static Cursor key_end(Cursor p, Cursor end, bool strict) {
    Cursor q = string_end(p, end);
    return q != NULL && strict && coerced_key(p + 1, q - 1) ? NULL : q;
}

static Cursor literal_end(Cursor p, Cursor end, const char *word, size_t n) {
    return (size_t)(end - p) >= n && memcmp(p, word, n) == 0 ? p + n : NULL;
}

/* 1: [p, end) is exactly one JSON value nested at most limit (<= MAX_DEPTH) deep; 0: it is not, or this
 * scan does not know. */
static int one_value(Cursor p, Cursor end, int limit, bool strict) {
    char open[MAX_DEPTH]; /* '[' or '{' for each container the scan is inside of */
    int depth = 0;
    p = skip_space(p, end);
    for (;;) {
        /* A value starts at p (after skipping space). */
        if (p >= end) return 0;
        switch (*p) {
        case '[':
        case '{':
            if (depth == limit) return 0;
            open[depth++] = (char)*p;
            p = skip_space(p + 1, end);
            if (p < end && *p == (open[depth - 1] == '[' ? ']' : '}')) {
                p++;
                depth--;
                break;
            }
            if (open[depth - 1] == '{') {
                if (p >= end || *p != '"' || (p = key_end(p, end, strict)) == NULL) return 0;
                p = skip_space(p, end);
                if (p >= end || *p != ':') return 0;
                p = skip_space(p + 1, end);
            }
            continue; /* the first element or member's value */
        case '"': p = string_end(p, end); break;
        case 't': p = literal_end(p, end, "true", 4); break;
        case 'f': p = literal_end(p, end, "false", 5); break;
        case 'n': p = literal_end(p, end, "null", 4); break;
        default: p = number_end(p, end, strict); break;
        }
        if (p == NULL) return 0;
        /* A value ended at p: close containers, or go on to the next element or member. */
        for (;;) {
            p = skip_space(p, end);
            if (depth == 0) return p == end;
            if (p >= end) return 0;
            char closing = open[depth - 1] == '[' ? ']' : '}';
            if (*p == closing) {
                p++;
                depth--;
                continue;
            }
            if (*p != ',') return 0;
            p = skip_space(p + 1, end);
            if (open[depth - 1] == '{') {
                if (p >= end || *p != '"' || (p = key_end(p, end, strict)) == NULL) return 0;
                p = skip_space(p, end);
                if (p >= end || *p != ':') return 0;
                p = skip_space(p + 1, end);
            }
            break; /* the next value */
        }
    }
}

static PyObject *is_json(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *bytes;
    int limit = MAX_DEPTH;
    int strict = 0;
    if (!PyArg_ParseTuple(args, "O|ip:is_json", &bytes, &limit, &strict)) return NULL;
    if (limit < 0 || limit > MAX_DEPTH) limit = MAX_DEPTH;
    char *data;
    Py_ssize_t size;
    if (PyBytes_AsStringAndSize(bytes, &data, &size) < 0) return NULL;
    int answer;
    Py_BEGIN_ALLOW_THREADS;
    answer = one_value((Cursor)data, (Cursor)data + size, limit, strict);
    Py_END_ALLOW_THREADS;
    return PyBool_FromLong(answer);
}

static PyMethodDef methods[] = {
    {"is_json", is_json, METH_VARARGS,
     "is_json(data, max_depth=512, strict=False): True only if the bytes are exactly one JSON value nested at "
     "most max_depth deep (strict: with no key spelled like a number, bool or null, no integer of 19 digits or "
     "more) (json_syntax.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_json_syntax",
    .m_doc = "Whether bytes are exactly one JSON value, without building it (json_syntax.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__json_syntax(void) { return PyModule_Create(&module); }
