/*
 * Where the last top-level line of Python source starts, found without parsing the source: the extension
 * module guest_runtime.monty._source_scan (loaded by cell_source.py).
 *
 * A Python cell's value is written as JSON by its Monty child once the cell's last statement, if it is an
 * expression, is assigned to a name (cell_source.py).  Finding that statement with CPython's parser builds
 * an object for every node of the cell: ~0.4 ms per KiB of ordinary code, more than Monty takes to parse
 * and run it.  This scan reads the bytes once and returns the number of the last line that starts a
 * top-level logical line: at column 0, outside every string and bracket, not a continuation, not blank or
 * a comment.  Only that line and what follows it are then parsed.
 *
 * It follows Python's tokenizer for strings (prefixes, triple quotes, escapes, the replacement fields of
 * f- and t-strings with the strings nested in them), comments, brackets and line continuations.  Whatever
 * it is not sure of (an unterminated string, unbalanced brackets, a comment or a backslash inside a
 * replacement field, a quote in a format spec, a lone carriage return, a NUL, fields nested past
 * MAX_NESTING) it refuses: the cell then runs as written.  So the line it names is always a real start of
 * a top-level statement; it may be an earlier one than the last only where a later line starts with
 * white space (a form feed), which costs nothing but a longer parse.
 */
#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x030B0000
#include <Python.h>

#include <stdbool.h>
#include <stddef.h>

/* Replacement fields nested deeper than this are refused. */
#define MAX_NESTING 16

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
    Py_ssize_t line;          /* 1-based number of the line p is on */
    const unsigned char *at;  /* where the last top-level logical line found so far starts */
} Scan;

static bool is_name_char(unsigned char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

static bool is_prefix_char(unsigned char c) {
    switch (c) {
    case 'r': case 'R': case 'b': case 'B': case 'u': case 'U': case 'f': case 'F': case 't': case 'T':
        return true;
    default:
        return false;
    }
}

/* Consume the line end at s->p ("\n" or "\r\n"); false for a lone "\r" (a line end for CPython, not Monty). */
static bool line_end(Scan *s) {
    if (*s->p == '\r') {
        if (s->end - s->p < 2 || s->p[1] != '\n') return false;
        s->p++;
    }
    s->p++;
    s->line++;
    return true;
}

static bool skip_string(Scan *s, bool formatted, int nesting);

/* Skip a string that starts at s->p, with the letters [s->p, quote) as its prefix. */
static bool skip_prefixed(Scan *s, const unsigned char *quote, int nesting) {
    bool formatted = false;
    for (const unsigned char *c = s->p; c < quote; c++)
        if (*c == 'f' || *c == 'F' || *c == 't' || *c == 'T') formatted = true;
    s->p = quote;
    return skip_string(s, formatted, nesting);
}

/* At a name, a number or a string's prefix: skip the run, and the string if the run is its prefix. */
static bool skip_word(Scan *s, int nesting) {
    const unsigned char *start = s->p;
    bool prefix = true;
    while (s->p < s->end && is_name_char(*s->p)) {
        prefix = prefix && is_prefix_char(*s->p);
        s->p++;
    }
    if (s->p < s->end && (*s->p == '\'' || *s->p == '"') && prefix && s->p - start <= 2) {
        const unsigned char *quote = s->p;
        s->p = start;
        return skip_prefixed(s, quote, nesting);
    }
    return true;
}

static bool skip_field(Scan *s, int nesting);

/* A replacement field's format spec, after its ':' up to and with the field's closing brace. */
static bool skip_spec(Scan *s, int nesting) {
    while (s->p < s->end) {
        unsigned char c = *s->p;
        if (c == '{') {
            s->p++;
            if (!skip_field(s, nesting + 1)) return false;
        } else if (c == '}') {
            s->p++;
            return true;
        } else if (c == '\'' || c == '"' || c == '\\' || c == '\n' || c == '\r' || c == 0) {
            return false;
        } else {
            s->p++;
        }
    }
    return false;
}

/* A replacement field, after its opening brace up to and with its closing one. */
static bool skip_field(Scan *s, int nesting) {
    if (nesting > MAX_NESTING) return false;
    int depth = 0;
    while (s->p < s->end) {
        unsigned char c = *s->p;
        if (c == '\'' || c == '"') {
            if (!skip_string(s, false, nesting)) return false;
        } else if (is_name_char(c)) {
            if (!skip_word(s, nesting)) return false;
        } else if (c == '(' || c == '[' || c == '{') {
            depth++;
            s->p++;
        } else if (c == ')' || c == ']') {
            if (depth-- == 0) return false;
            s->p++;
        } else if (c == '}') {
            s->p++;
            if (depth-- == 0) return true;
        } else if (c == ':' && depth == 0) {
            s->p++;
            return skip_spec(s, nesting);
        } else if (c == '\n' || c == '\r') {
            if (!line_end(s)) return false;
        } else if (c == '#' || c == '\\' || c == 0) {
            return false;
        } else {
            s->p++;
        }
    }
    return false;
}

/* Skip the string whose opening quote is at s->p (its prefix already passed). */
static bool skip_string(Scan *s, bool formatted, int nesting) {
    unsigned char quote = *s->p;
    bool triple = s->end - s->p >= 3 && s->p[1] == quote && s->p[2] == quote;
    s->p += triple ? 3 : 1;
    while (s->p < s->end) {
        unsigned char c = *s->p;
        if (c == '\\') {
            /* An escape, raw or not: the next character never ends the string (a line end counts a line). */
            s->p++;
            if (s->p >= s->end) return false;
            if (*s->p == '\n' || *s->p == '\r') {
                if (!line_end(s)) return false;
            } else {
                s->p++;
            }
        } else if (c == quote) {
            if (!triple) {
                s->p++;
                return true;
            }
            if (s->end - s->p >= 3 && s->p[1] == quote && s->p[2] == quote) {
                s->p += 3;
                return true;
            }
            s->p++;
        } else if (c == '\n' || c == '\r') {
            if (!triple || !line_end(s)) return false;
        } else if (c == 0) {
            return false;
        } else if (formatted && (c == '{' || c == '}')) {
            if (s->end - s->p >= 2 && s->p[1] == c) {
                s->p += 2; /* "{{" or "}}": a brace of the text */
            } else if (c == '}') {
                return false;
            } else {
                s->p++;
                if (!skip_field(s, nesting + 1)) return false;
            }
        } else {
            s->p++;
        }
    }
    return false;
}

/* The line of the last top-level logical line's start; 0 if none; -1 if refused. */
static Py_ssize_t last_line(Scan *s) {
    Py_ssize_t found = 0;
    int depth = 0;
    bool line_start = true, continued = false;
    while (s->p < s->end) {
        unsigned char c = *s->p;
        if (line_start) {
            if (depth == 0 && !continued && c != ' ' && c != '\t' && c != '\f' && c != '#' && c != '\n' && c != '\r') {
                found = s->line;
                s->at = s->p;
            }
            line_start = continued = false;
        }
        if (c == '\n' || c == '\r') {
            if (!line_end(s)) return -1;
            line_start = true;
        } else if (c == '#') {
            while (s->p < s->end && *s->p != '\n' && *s->p != '\r') s->p++;
        } else if (c == '\\') {
            s->p++;
            if (s->p >= s->end || (*s->p != '\n' && *s->p != '\r') || !line_end(s)) return -1;
            line_start = continued = true;
        } else if (c == '\'' || c == '"') {
            if (!skip_string(s, false, 0)) return -1;
        } else if (is_name_char(c)) {
            if (!skip_word(s, 0)) return -1;
        } else if (c == '(' || c == '[' || c == '{') {
            depth++;
            s->p++;
        } else if (c == ')' || c == ']' || c == '}') {
            if (depth-- == 0) return -1;
            s->p++;
        } else if (c == 0) {
            return -1;
        } else {
            s->p++;
        }
    }
    return depth == 0 ? found : -1;
}

static PyObject *last_top_level_line(PyObject *self, PyObject *arg) {
    (void)self;
    Py_ssize_t size;
    const char *data = PyUnicode_AsUTF8AndSize(arg, &size);
    if (data == NULL) return NULL; /* not a str, or a lone surrogate: the caller runs the cell as written */
    const unsigned char *start = (const unsigned char *)data;
    Scan s = {start, start + size, 1, start};
    Py_ssize_t line, index = 0;
    Py_BEGIN_ALLOW_THREADS;
    line = last_line(&s);
    /* The line's start as an index into the str: the characters before it (UTF-8 lead bytes). */
    for (const unsigned char *c = start; line > 0 && c < s.at; c++) index += (*c & 0xC0) != 0x80;
    Py_END_ALLOW_THREADS;
    return Py_BuildValue("(nn)", line, line > 0 ? index : 0);
}

static PyMethodDef methods[] = {
    {"last_top_level_line", last_top_level_line, METH_O,
     "last_top_level_line(source): (the 1-based line where the last top-level logical line of Python source "
     "starts, the index of its first character); line 0 if none, -1 if the scan is not sure (source_scan.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_source_scan",
    .m_doc = "Where the last top-level line of Python source starts, without parsing it (source_scan.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__source_scan(void) { return PyModule_Create(&module); }
