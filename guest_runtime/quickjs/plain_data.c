/*
 * The guest prelude's plain-data check, in C: the extension module guest_runtime.quickjs._plain_data.
 *
 * Before the prelude serialises a value with the engine's own JSON.stringify (prelude/serialise.js),
 * it must know that the value is plain data: nothing in it can run cell code while it is written
 * (no accessor, no toJSON, no Proxy) or be written other than as the cell meant (no Promise, no
 * Error, no BigInt, no cycle, no nesting past the cap).  Walked in interpreted JavaScript that proof
 * cost ~1.7 us per value (a 1 MiB array of objects: ~200 ms); here it costs tens of nanoseconds.
 *
 * This walk only ever says "plain" (and how many values it visited, counted exactly as the
 * prelude's isPlain counts them) or "ask the prelude": anything it does not recognise at once -- a
 * function, a class instance, a Date, a Proxy, an own toJSON, a getter, a cycle, a value larger
 * than its visit budget -- goes back to the prelude's own walk, which decides as before.  It calls
 * no JavaScript, allocates nothing of the guest's, and stops after VISIT_BUDGET values or
 * COMPARE_BUDGET cycle-check comparisons (many objects under a deep chain), so its
 * time is bounded even though the engine's interrupt handler is not consulted while it runs.
 *
 * Given a sixth argument `true`, the same walk also writes the value's JSON text as it goes, byte for
 * byte what JSON.stringify writes for plain data (checked against it on a table and on hypothesis values),
 * and answers that text: the engine's own JSON.stringify looks up toJSON and every property through the
 * generic paths and cost ~25 ms for a 1 MiB array of objects, this ~3 ms.  An array with a hole (read
 * through the prototype chain) or an element that is not enumerable, and text past OUTPUT_BUDGET bytes,
 * are also left to the prelude.
 *
 * The engine is the pinned quickjs-ng's, inside the `_quickjs` extension of PyPI quickjs-ng.  This
 * module does not link against it: the engine module (engine.py) hands over the addresses of the
 * C API functions used below, and the types are declared here as quickjs.h declares them for a
 * 64-bit build (a JSValue is a 16-byte struct; no NaN boxing).  engine.py's check_engine() proves
 * at worker start that this walk and the prelude's agree on a table of values.
 */
#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x030B0000
#include <Python.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- the engine's C API, as quickjs.h (quickjs-ng 0.17) declares it on 64-bit platforms ---- */

typedef struct JSContext JSContext;
typedef uint32_t JSAtom;
typedef uint32_t JSClassID;
typedef union {
    int32_t int32;
    double float64;
    void *ptr;
    int32_t short_big_int;
} JSValueUnion;
typedef struct {
    JSValueUnion u;
    int64_t tag;
} JSValue;
typedef struct {
    bool is_enumerable;
    JSAtom atom;
} JSPropertyEnum;
typedef struct {
    int flags;
    JSValue value;
    JSValue getter;
    JSValue setter;
} JSPropertyDescriptor;
typedef JSValue JSCFunction(JSContext *ctx, JSValue this_val, int argc, JSValue *argv);

enum {
    TAG_BIG_INT = -9,
    TAG_SYMBOL = -8,
    TAG_STRING = -7,
    TAG_OBJECT = -1,
    TAG_INT = 0,
    TAG_BOOL = 1,
    TAG_NULL = 2,
    TAG_UNDEFINED = 3,
    TAG_EXCEPTION = 6,
    TAG_SHORT_BIG_INT = 7,
    TAG_FLOAT64 = 8,
};
#define PROP_GETSET (1 << 4)
#define GPN_STRING_MASK (1 << 0)
#define GPN_ENUM_ONLY (1 << 4)
#define CFUNC_GENERIC 0

/* The functions engine.py hands over, in this order (bind()). */
static struct {
    int (*get_own_property_names)(JSContext *, JSPropertyEnum **, uint32_t *, JSValue, int);
    int (*get_own_property)(JSContext *, JSPropertyDescriptor *, JSValue, JSAtom);
    void (*free_property_enum)(JSContext *, JSPropertyEnum *, uint32_t);
    JSValue (*get_prototype)(JSContext *, JSValue);
    JSClassID (*get_class_id)(JSValue);
    int (*get_length)(JSContext *, JSValue, int64_t *);
    void (*free_value)(JSContext *, JSValue);
    JSAtom (*new_atom)(JSContext *, const char *);
    void (*free_atom)(JSContext *, JSAtom);
    JSValue (*get_exception)(JSContext *);
    JSValue (*new_cfunction2)(JSContext *, JSCFunction *, const char *, int, int, int);
    JSValue (*get_global_object)(JSContext *);
    int (*set_property_str)(JSContext *, JSValue, const char *, JSValue);
    const char *(*to_cstring_len2)(JSContext *, size_t *, JSValue, bool);
    void (*free_cstring)(JSContext *, const char *);
    const char *(*atom_to_cstring_len)(JSContext *, size_t *, JSAtom);
    JSValue (*new_string_len)(JSContext *, const char *, size_t);
    JSAtom (*new_atom_uint32)(JSContext *, uint32_t);
} api;
#define API_FUNCTIONS (sizeof(api) / sizeof(void *))
static bool bound = false;

/* ---- the walk ---- */

/* Values one check visits at most (a few hundred milliseconds of C); past it the prelude's own walk,
   which the engine's deadline interrupts, takes over. */
#define VISIT_BUDGET (1 << 22)
/* Cycle-check comparisons one check makes at most (each object is compared with the objects above it):
   without it a million shared objects under a 200-deep chain would cost 200M comparisons. */
#define COMPARE_BUDGET (1 << 26)
/* The deepest nesting this walk follows; the prelude's cap (MAX_NESTING) is lower. */
#define MAX_STACK 1024
/* The longest JSON text the writer builds (outside the engine's heap, in this process's memory); a longer
   one is left to the prelude, whose JSON.stringify builds it inside the heap and its cap. */
#define OUTPUT_BUDGET ((size_t)64 << 20)
/* Object keys whose written form ("key":) the writer keeps for reuse within one value, by atom. */
#define KEY_SLOTS 256

/* The JSON text being written. */
typedef struct {
    char *data;
    size_t len, cap;
} Out;

typedef struct {
    JSAtom atom;
    size_t len;
    char *text; /* the quoted key and its colon */
} Key;

typedef struct {
    JSContext *ctx;
    void *object_proto, *array_proto;
    JSClassID object_class, array_class;
    JSAtom to_json;
    int64_t count, compared;
    int max_depth, depth;
    Out out;
    Key keys[KEY_SLOTS];
    void *stack[MAX_STACK];
} Walk;

static void drop_exception(JSContext *ctx) { api.free_value(ctx, api.get_exception(ctx)); }

static void free_descriptor(JSContext *ctx, JSPropertyDescriptor *d) {
    api.free_value(ctx, d->value);
    api.free_value(ctx, d->getter);
    api.free_value(ctx, d->setter);
}

/* Whether an object of this class has the prototype JSON.stringify may trust: an ordinary object's
   is Object.prototype or null, an array's the unchanged Array.prototype. */
static bool plain_prototype(Walk *w, JSValue v, bool is_array) {
    JSValue proto = api.get_prototype(w->ctx, v);
    bool ok;
    if (proto.tag == TAG_OBJECT)
        ok = proto.u.ptr == (is_array ? w->array_proto : w->object_proto);
    else
        ok = proto.tag == TAG_NULL && !is_array;
    if (proto.tag == TAG_EXCEPTION)
        drop_exception(w->ctx);
    else
        api.free_value(w->ctx, proto);
    return ok;
}

/* Whether object v is one the walk may enter: an ordinary object or array with a trusted prototype and
   no own toJSON, not already on the stack, within the nesting cap and the comparison budget. */
static bool enterable(Walk *w, JSValue v, bool *is_array) {
    JSClassID cls = api.get_class_id(v);
    *is_array = cls == w->array_class;
    if (!*is_array && cls != w->object_class) return false;
    if (w->depth >= w->max_depth) return false;
    w->compared += w->depth;
    if (w->compared > COMPARE_BUDGET) return false;
    for (int i = 0; i < w->depth; i++)
        if (w->stack[i] == v.u.ptr) return false;
    if (!plain_prototype(w, v, *is_array)) return false;
    /* JSON.stringify reads toJSON, enumerable or not; any own one (even a non-function) goes to the prelude. */
    JSPropertyDescriptor d;
    int has = api.get_own_property(w->ctx, &d, v, w->to_json);
    if (has != 0) {
        if (has < 0)
            drop_exception(w->ctx);
        else
            free_descriptor(w->ctx, &d);
        return false;
    }
    return true;
}

/* The own enumerable string keys of v, in JSON.stringify's order; false (nothing to free) if they could not be had. */
static bool own_keys(Walk *w, JSValue v, JSPropertyEnum **keys, uint32_t *n) {
    if (api.get_own_property_names(w->ctx, keys, n, v, GPN_STRING_MASK | GPN_ENUM_ONLY) < 0) {
        drop_exception(w->ctx);
        return false;
    }
    return true;
}

/* An own data property of v: 1 (its value in d, to free), or 0 (an accessor, gone, or an error: ask the prelude). */
static int data_property(Walk *w, JSValue v, JSAtom atom, JSPropertyDescriptor *d) {
    int found = api.get_own_property(w->ctx, d, v, atom);
    if (found < 0) drop_exception(w->ctx);
    if (found <= 0) return 0;
    if (d->flags & PROP_GETSET) {
        free_descriptor(w->ctx, d);
        return 0;
    }
    return 1;
}

/* 1: v is plain data; 0: ask the prelude. */
static int walk(Walk *w, JSValue v) {
    if (++w->count > VISIT_BUDGET) return 0;
    if (v.tag == TAG_BIG_INT || v.tag == TAG_SHORT_BIG_INT) return 0;
    if (v.tag != TAG_OBJECT) return 1; /* a string, number, boolean, null, undefined or symbol */
    bool is_array;
    if (!enterable(w, v, &is_array)) return 0;
    JSContext *ctx = w->ctx;
    JSPropertyEnum *keys;
    uint32_t n;
    if (!own_keys(w, v, &keys, &n)) return 0;
    int result = 1;
    if (is_array) {
        /* An array's holes count as values (JSON.stringify writes each as null), as in the prelude. */
        int64_t length;
        if (api.get_length(ctx, v, &length) < 0) {
            drop_exception(ctx);
            result = 0;
        } else {
            w->count += length - (int64_t)n;
            if (w->count > VISIT_BUDGET) result = 0;
        }
    }
    w->stack[w->depth++] = v.u.ptr;
    JSPropertyDescriptor d;
    for (uint32_t i = 0; result == 1 && i < n; i++) {
        result = data_property(w, v, keys[i].atom, &d);
        if (result) {
            result = walk(w, d.value);
            free_descriptor(ctx, &d);
        }
    }
    w->depth--;
    api.free_property_enum(ctx, keys, n);
    return result;
}

/* ---- the writer: the same walk, writing JSON.stringify's text as it goes ---- */

static bool grow(Out *o, size_t more) {
    if (more > OUTPUT_BUDGET - o->len) return false;
    size_t cap = o->cap ? o->cap : 4096;
    while (cap - o->len < more) cap *= 2;
    if (cap > OUTPUT_BUDGET) cap = OUTPUT_BUDGET;
    char *data = realloc(o->data, cap);
    if (data == NULL) return false;
    o->data = data;
    o->cap = cap;
    return true;
}

static inline bool put(Out *o, const char *s, size_t n) {
    if (n > o->cap - o->len && !grow(o, n)) return false;
    memcpy(o->data + o->len, s, n);
    o->len += n;
    return true;
}

static bool put_int(Out *o, int64_t i) {
    char buf[24], *end = buf + sizeof buf, *p = end;
    uint64_t u = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (i < 0) *--p = '-';
    return put(o, p, (size_t)(end - p));
}

/* s (UTF-8 as the engine hands it over, a lone surrogate as its own three bytes) written as a JSON string:
   as JSON.stringify escapes, " \ and the controls, the five short forms, and lone surrogates as \udxxx. */
static bool put_quoted(Out *o, const unsigned char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    if (!put(o, "\"", 1)) return false;
    size_t run = 0; /* the start of the bytes written as they are */
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        char esc[6] = {'\\', 'u', '0', '0', 0, 0};
        size_t len = 2, skip = 1;
        if (c >= 0x20 && c != '"' && c != '\\' && !(c == 0xED && i + 2 < n && (s[i + 1] & 0xE0) == 0xA0)) {
            i++;
            continue;
        }
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            if (c < 0x20) {
                esc[4] = hex[c >> 4];
                esc[5] = hex[c & 15];
            } else { /* ED A0..BF xx: a surrogate code unit U+D800..U+DFFF that has no partner */
                unsigned unit = 0xD000 | ((unsigned)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
                esc[2] = 'd';
                esc[3] = hex[(unit >> 8) & 15];
                esc[4] = hex[(unit >> 4) & 15];
                esc[5] = hex[unit & 15];
                skip = 3;
            }
            len = 6;
        }
        if (!put(o, (const char *)s + run, i - run) || !put(o, esc, len)) return false;
        i += skip;
        run = i;
    }
    return put(o, (const char *)s + run, n - run) && put(o, "\"", 1);
}

/* A string or a number as the engine writes it (JS_ToCStringLen2 runs no cell code for either). */
static bool put_text(Walk *w, JSValue v, bool quoted) {
    size_t n;
    const char *s = api.to_cstring_len2(w->ctx, &n, v, false);
    if (s == NULL) {
        drop_exception(w->ctx);
        return false;
    }
    bool ok = quoted ? put_quoted(&w->out, (const unsigned char *)s, n) : put(&w->out, s, n);
    api.free_cstring(w->ctx, s);
    return ok;
}

static bool put_number(Walk *w, JSValue v) {
    double d = v.u.float64;
    if (!isfinite(d)) return put(&w->out, "null", 4);
    /* Integers below 2^53 are written exactly (-0 as 0); others in the engine's shortest form. */
    if (d == trunc(d) && fabs(d) < 9007199254740992.0) return put_int(&w->out, (int64_t)d);
    return put_text(w, v, false);
}

/* "key": for the object key atom, from the writer's keys if it wrote it before. */
static bool put_key(Walk *w, JSAtom atom) {
    Key *k = &w->keys[atom % KEY_SLOTS];
    if (k->text == NULL || k->atom != atom) {
        size_t n;
        const char *s = api.atom_to_cstring_len(w->ctx, &n, atom);
        if (s == NULL) {
            drop_exception(w->ctx);
            return false;
        }
        Out quoted = {0};
        bool ok = put_quoted(&quoted, (const unsigned char *)s, n) && put(&quoted, ":", 1);
        api.free_cstring(w->ctx, s);
        if (!ok) {
            free(quoted.data);
            return false;
        }
        free(k->text);
        k->atom = atom;
        k->text = quoted.data;
        k->len = quoted.len;
    }
    return put(&w->out, k->text, k->len);
}

static int write_value(Walk *w, JSValue v);

/* An array's elements: each index an own data property (a hole, read through the prototype chain, or an
   element that is not enumerable, goes to the prelude); other keys JSON.stringify does not read. */
static int write_array(Walk *w, JSValue v, JSPropertyEnum *keys, uint32_t n) {
    int64_t length;
    if (api.get_length(w->ctx, v, &length) < 0) {
        drop_exception(w->ctx);
        return -1;
    }
    if (length > (int64_t)n || !put(&w->out, "[", 1)) return -1;
    JSPropertyDescriptor d;
    for (uint32_t i = 0; i < (uint32_t)length; i++) {
        JSAtom index = api.new_atom_uint32(w->ctx, i);
        bool in_place = index == keys[i].atom;
        api.free_atom(w->ctx, index);
        if (!in_place || (i > 0 && !put(&w->out, ",", 1)) || !data_property(w, v, keys[i].atom, &d)) return -1;
        int written = write_value(w, d.value);
        free_descriptor(w->ctx, &d);
        if (written < 0 || (written == 0 && !put(&w->out, "null", 4))) return -1;
    }
    return put(&w->out, "]", 1) ? 1 : -1;
}

/* An object's enumerable own properties, those whose value is undefined or a symbol left out. */
static int write_object(Walk *w, JSValue v, JSPropertyEnum *keys, uint32_t n) {
    if (!put(&w->out, "{", 1)) return -1;
    bool first = true;
    JSPropertyDescriptor d;
    for (uint32_t i = 0; i < n; i++) {
        size_t mark = w->out.len;
        if ((!first && !put(&w->out, ",", 1)) || !put_key(w, keys[i].atom) || !data_property(w, v, keys[i].atom, &d))
            return -1;
        int written = write_value(w, d.value);
        free_descriptor(w->ctx, &d);
        if (written < 0) return -1;
        if (written == 0)
            w->out.len = mark;
        else
            first = false;
    }
    return put(&w->out, "}", 1) ? 1 : -1;
}

/* 1: v written; 0: nothing written (undefined or a symbol, which an object leaves out and an array writes
   as null); -1: ask the prelude. */
static int write_value(Walk *w, JSValue v) {
    if (++w->count > VISIT_BUDGET) return -1;
    switch (v.tag) {
    case TAG_INT: return put_int(&w->out, v.u.int32) ? 1 : -1;
    case TAG_FLOAT64: return put_number(w, v) ? 1 : -1;
    case TAG_BOOL: return (v.u.int32 ? put(&w->out, "true", 4) : put(&w->out, "false", 5)) ? 1 : -1;
    case TAG_NULL: return put(&w->out, "null", 4) ? 1 : -1;
    case TAG_UNDEFINED:
    case TAG_SYMBOL: return 0;
    case TAG_STRING: return put_text(w, v, true) ? 1 : -1;
    case TAG_OBJECT: break;
    default: return -1; /* BigInt, or a tag this writer does not know */
    }
    bool is_array;
    if (!enterable(w, v, &is_array)) return -1;
    JSPropertyEnum *keys;
    uint32_t n;
    if (!own_keys(w, v, &keys, &n)) return -1;
    w->stack[w->depth++] = v.u.ptr;
    int written = is_array ? write_array(w, v, keys, n) : write_object(w, v, keys, n);
    w->depth--;
    api.free_property_enum(w->ctx, keys, n);
    return written;
}

/* isPlainData(value, depth, Object.prototype, Array.prototype, maxNesting[, write]): the number of values
   the walk visited when value is plain data (depth: the arrays the caller writes it inside of, which
   count towards maxNesting), or -1 when the prelude must decide.  With write true: value's JSON text
   (JSON.stringify's, "null" where it answers undefined), or -1. */
static JSValue is_plain_data(JSContext *ctx, JSValue this_val, int argc, JSValue *argv) {
    (void)this_val;
    JSValue answer = {.u = {.int32 = -1}, .tag = TAG_INT};
    if (argc < 5 || argv[1].tag != TAG_INT || argv[2].tag != TAG_OBJECT || argv[3].tag != TAG_OBJECT ||
        argv[4].tag != TAG_INT)
        return answer;
    bool write = argc > 5 && argv[5].tag == TAG_BOOL && argv[5].u.int32;
    int depth = argv[1].u.int32, max_depth = argv[4].u.int32;
    if (depth < 0 || max_depth > MAX_STACK || depth > max_depth) return answer;
    /* Only what this call uses is set: most calls write small values, and the walk's arrays are 14 KB. */
    Walk *w = malloc(sizeof(Walk));
    if (w == NULL) return answer;
    w->ctx = ctx;
    w->object_proto = argv[2].u.ptr;
    w->array_proto = argv[3].u.ptr;
    w->object_class = api.get_class_id(argv[2]);
    w->array_class = api.get_class_id(argv[3]);
    w->count = w->compared = 0;
    w->max_depth = max_depth;
    w->depth = depth;
    w->out = (Out){0};
    if (write) memset(w->keys, 0, sizeof w->keys);
    /* The enclosing arrays hold no value of the cell's: slots no object's address can match. */
    for (int i = 0; i < depth; i++) w->stack[i] = NULL;
    /* Array.prototype must still inherit from Object.prototype, which must hold no toJSON. */
    if (plain_prototype(w, argv[3], false)) {
        w->to_json = api.new_atom(ctx, "toJSON");
        JSPropertyDescriptor d;
        int inherited = 0;
        for (int i = 2; i <= 3; i++) {
            int has = api.get_own_property(ctx, &d, argv[i], w->to_json);
            if (has < 0) drop_exception(ctx);
            if (has > 0) free_descriptor(ctx, &d);
            inherited |= has != 0;
        }
        if (!inherited && write) {
            int written = write_value(w, argv[0]);
            if (written == 0) written = put(&w->out, "null", 4) ? 1 : -1;
            if (written > 0) {
                JSValue text = api.new_string_len(ctx, w->out.data, w->out.len);
                if (text.tag == TAG_EXCEPTION)
                    drop_exception(ctx); /* out of heap: the prelude's JSON.stringify fails the same way */
                else
                    answer = text;
            }
        } else if (!inherited && walk(w, argv[0])) {
            if (w->count <= INT32_MAX) {
                answer.u.int32 = (int32_t)w->count;
            } else {
                answer.u.float64 = (double)w->count;
                answer.tag = TAG_FLOAT64;
            }
        }
        api.free_atom(ctx, w->to_json);
    }
    if (write)
        for (int i = 0; i < KEY_SLOTS; i++) free(w->keys[i].text);
    free(w->out.data);
    free(w);
    return answer;
}

/* ---- the Python side ---- */

static PyObject *bind(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *addresses;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &addresses)) return NULL;
    if ((size_t)PyTuple_Size(addresses) != API_FUNCTIONS) {
        PyErr_Format(PyExc_ValueError, "bind() takes %d function addresses", (int)API_FUNCTIONS);
        return NULL;
    }
    void *table[API_FUNCTIONS];
    for (size_t i = 0; i < API_FUNCTIONS; i++) {
        table[i] = PyLong_AsVoidPtr(PyTuple_GetItem(addresses, (Py_ssize_t)i));
        if (table[i] == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a function address is 0");
            return NULL;
        }
    }
    memcpy(&api, table, sizeof(api));
    bound = true;
    Py_RETURN_NONE;
}

static PyObject *install(PyObject *self, PyObject *args) {
    (void)self;
    unsigned long long address;
    const char *slot;
    if (!PyArg_ParseTuple(args, "Ks", &address, &slot)) return NULL;
    if (!bound || address == 0) {
        PyErr_SetString(PyExc_RuntimeError, "install() needs bind() first and a context");
        return NULL;
    }
    JSContext *ctx = (JSContext *)(uintptr_t)address;
    JSValue fn = api.new_cfunction2(ctx, is_plain_data, "isPlainData", 5, CFUNC_GENERIC, 0);
    if (fn.tag == TAG_EXCEPTION) {
        drop_exception(ctx);
        PyErr_SetString(PyExc_MemoryError, "the engine could not make the plain-data function");
        return NULL;
    }
    JSValue global = api.get_global_object(ctx);
    int set = api.set_property_str(ctx, global, slot, fn); /* takes fn */
    api.free_value(ctx, global);
    if (set < 0) {
        drop_exception(ctx);
        PyErr_SetString(PyExc_MemoryError, "the engine could not store the plain-data function");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_VARARGS, "bind(addresses): the engine's C API functions, in the order plain_data.c lists them."},
    {"install", install, METH_VARARGS, "install(context, slot): put isPlainData on the context's global object as slot."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_plain_data",
    .m_doc = "The guest prelude's plain-data check, in C (plain_data.c).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__plain_data(void) { return PyModule_Create(&module); }
