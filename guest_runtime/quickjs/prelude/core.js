// @ts-check
// codemode guest prelude, part 1: the built-ins it captures and small shared helpers.
//
// The prelude is one function body split over the files listed in guest_runtime/quickjs/prelude_source.py;
// they are joined in that order, line for line, inside one strict-mode function whose value is the
// host hook, and compiled to bytecode once per worker.  All files share that one scope.  The driver
// keeps the hook; the global it reads it from is gone before any cell code runs (hook.js), so guest
// code cannot reach it: there is no bridge name to find, and no Python callable is registered in
// the guest at all.  Guest requests are queued here and pumped by the worker loop ("take");
// replies come back through "settle", in any order.  Everything the prelude relies on after user
// code starts running is captured up front (this file), so a cell that patches built-ins can only
// confuse itself.

/** @type {typeof globalThis & Record<string, unknown>} */
const G = globalThis;
const ObjectCreate = Object.create;
const ObjectKeys = Object.keys;
const ObjectFreeze = Object.freeze;
const defineProperty = Object.defineProperty;
const getPrototypeOf = Object.getPrototypeOf;
const getOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
const ReflectApply = Reflect.apply;
const JSONStringify = JSON.stringify;
const JSONParse = JSON.parse;
const NativePromise = Promise;
const promiseThen = Promise.prototype.then;
const ArrayIsArray = Array.isArray;
const StringCtor = String;
const NumberIsFinite = Number.isFinite;
const MathFloor = Math.floor;
const ErrorCtor = Error;
const TypeErrorCtor = TypeError;
const RangeErrorCtor = RangeError;
const WeakSetCtor = WeakSet;
const WeakMapCtor = WeakMap;
const weakSetAdd = WeakSet.prototype.add;
const weakSetHas = WeakSet.prototype.has;
const weakMapGet = WeakMap.prototype.get;
const weakMapSet = WeakMap.prototype.set;
const weakMapHas = WeakMap.prototype.has;
const ErrorProto = Error.prototype;
const PromiseProto = Promise.prototype;
const ObjectProto = Object.prototype;
const ArrayProto = Array.prototype;
const stringSlice = String.prototype.slice;
const stringCharCodeAt = String.prototype.charCodeAt;
const stringToWellFormed = String.prototype.toWellFormed;
const arrayJoin = Array.prototype.join;
const AsyncFunction = (async function () {}).constructor;
const setPrototypeOf = Object.setPrototypeOf;
const arraySlice = Array.prototype.slice;

// Arrays the prelude fills by index have no prototype: an index setter a cell puts on
// Array.prototype (or Object.prototype) can neither see nor swallow what the prelude stores.
/**
 * @template T
 * @returns {T[]}
 */
function newList() {
  return setPrototypeOf([], null);
}
// A plain Array copy of a list, for values handed to the cell (slice defines, never sets).
/**
 * @template T
 * @param {T[]} l
 * @returns {T[]}
 */
function toArray(l) {
  return ReflectApply(arraySlice, l, []);
}
/**
 * @param {object} o
 * @param {PropertyKey} k
 * @param {unknown} v
 */
function defineValue(o, k, v) {
  defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
}

// MAX_NESTING (guest_config.js): arrays/objects a value crossing the bridge may nest.
const TOO_DEEP = "[Nested too deep: values may nest at most " + MAX_NESTING + " levels of arrays/objects]";
