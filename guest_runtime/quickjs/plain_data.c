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
 * The engine is the pinned quickjs-ng's, inside the `_quickjs` extension of PyPI quickjs-ng.  This
 * module does not link against it: the engine module (engine.py) hands over the addresses of the
 * C API functions used below, and the types are declared here as quickjs.h declares them for a
 * 64-bit build (a JSValue is a 16-byte struct; no NaN boxing).  engine.py's check_engine() proves
 * at worker start that this walk and the prelude's agree on a table of values.
 */
#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x030B0000
#include <Python.h>

#include <stdbool.h>
#include <stdint.h>
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
    TAG_OBJECT = -1,
    TAG_INT = 0,
    TAG_NULL = 2,
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

typedef struct {
    JSContext *ctx;
    void *object_proto, *array_proto;
    JSClassID object_class, array_class;
    JSAtom to_json;
    int64_t count, compared;
    int max_depth, depth;
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

/* 1: v is plain data; 0: ask the prelude. */
static int walk(Walk *w, JSValue v) {
    if (++w->count > VISIT_BUDGET) return 0;
    if (v.tag == TAG_BIG_INT || v.tag == TAG_SHORT_BIG_INT) return 0;
    if (v.tag != TAG_OBJECT) return 1; /* a string, number, boolean, null, undefined or symbol */
    JSClassID cls = api.get_class_id(v);
    bool is_array = cls == w->array_class;
    if (!is_array && cls != w->object_class) return 0;
    if (w->depth >= w->max_depth) return 0;
    w->compared += w->depth;
    if (w->compared > COMPARE_BUDGET) return 0;
    for (int i = 0; i < w->depth; i++)
        if (w->stack[i] == v.u.ptr) return 0;
    if (!plain_prototype(w, v, is_array)) return 0;

    JSContext *ctx = w->ctx;
    JSPropertyDescriptor d;
    /* JSON.stringify reads toJSON, enumerable or not; any own one (even a non-function) goes to the prelude. */
    int has = api.get_own_property(ctx, &d, v, w->to_json);
    if (has != 0) {
        if (has < 0)
            drop_exception(ctx);
        else
            free_descriptor(ctx, &d);
        return 0;
    }
    JSPropertyEnum *keys;
    uint32_t n;
    if (api.get_own_property_names(ctx, &keys, &n, v, GPN_STRING_MASK | GPN_ENUM_ONLY) < 0) {
        drop_exception(ctx);
        return 0;
    }
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
    for (uint32_t i = 0; result == 1 && i < n; i++) {
        int found = api.get_own_property(ctx, &d, v, keys[i].atom);
        if (found <= 0) {
            if (found < 0) drop_exception(ctx);
            result = 0;
            break;
        }
        if (d.flags & PROP_GETSET)
            result = 0;
        else
            result = walk(w, d.value);
        free_descriptor(ctx, &d);
    }
    w->depth--;
    api.free_property_enum(ctx, keys, n);
    return result;
}

/* isPlainData(value, depth, Object.prototype, Array.prototype, maxNesting): the number of values the
   walk visited when value is plain data (depth: the arrays the caller writes it inside of, which
   count towards maxNesting), or -1 when the prelude must decide. */
static JSValue is_plain_data(JSContext *ctx, JSValue this_val, int argc, JSValue *argv) {
    (void)this_val;
    JSValue answer = {.u = {.int32 = -1}, .tag = TAG_INT};
    if (argc < 5 || argv[1].tag != TAG_INT || argv[2].tag != TAG_OBJECT || argv[3].tag != TAG_OBJECT ||
        argv[4].tag != TAG_INT)
        return answer;
    int depth = argv[1].u.int32, max_depth = argv[4].u.int32;
    if (depth < 0 || max_depth > MAX_STACK || depth > max_depth) return answer;
    Walk w = {
        .ctx = ctx,
        .object_proto = argv[2].u.ptr,
        .array_proto = argv[3].u.ptr,
        .object_class = api.get_class_id(argv[2]),
        .array_class = api.get_class_id(argv[3]),
        .count = 0,
        .compared = 0,
        .max_depth = max_depth,
        .depth = depth,
    };
    /* The enclosing arrays hold no value of the cell's: slots no object's address can match. */
    for (int i = 0; i < depth; i++) w.stack[i] = NULL;
    /* Array.prototype must still inherit from Object.prototype, which must hold no toJSON. */
    if (!plain_prototype(&w, argv[3], false)) return answer;
    w.to_json = api.new_atom(ctx, "toJSON");
    JSPropertyDescriptor d;
    int inherited = 0;
    for (int i = 2; i <= 3; i++) {
        int has = api.get_own_property(ctx, &d, argv[i], w.to_json);
        if (has < 0) drop_exception(ctx);
        if (has > 0) free_descriptor(ctx, &d);
        inherited |= has != 0;
    }
    int plain = !inherited && walk(&w, argv[0]);
    api.free_atom(ctx, w.to_json);
    if (!plain) return answer;
    if (w.count <= INT32_MAX) {
        answer.u.int32 = (int32_t)w.count;
    } else {
        answer.u.float64 = (double)w.count;
        answer.tag = TAG_FLOAT64;
    }
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
