// @ts-check
// Stack traces without functions: what Error.prepareStackTrace hands the cell.

// The engine hands Error.prepareStackTrace raw call sites whose getFunction() returns the
// function of every frame, the host hook included.  The engine's own slot only ever holds
// prepareWithSafeSites below: the cell's function gets frozen call sites that carry names and
// positions but no function, and no frame of the prelude at all.  The
// accessor is not configurable, so a cell cannot put the engine's setter back.
const prepareAccessor = getOwnPropertyDescriptor(ErrorCtor, "prepareStackTrace");
const enginePrepareSet = prepareAccessor === undefined ? undefined : prepareAccessor.set;
if (enginePrepareSet === undefined) {
  // Without it a cell's prepareStackTrace would see the prelude's functions: refuse to load.
  throw new TypeErrorCtor("the engine has no Error.prepareStackTrace accessor; is quickjs-ng the pinned version?");
}
/** @type {CallSite[]} */
let probeSites = newList();
ReflectApply(enginePrepareSet, ErrorCtor, [/** @param {Error} _error @param {CallSite[]} sites */ function (_error, sites) { probeSites = sites; return ""; }]);
new ErrorCtor("call site probe");
ReflectApply(enginePrepareSet, ErrorCtor, [undefined]);
const engineSite = getPrototypeOf(probeSites[0]);
probeSites = newList();
/** @type {Record<string, (this: CallSite) => unknown>} */
const siteFields = ObjectCreate(null);
siteFields.getFileName = engineSite.getFileName;
siteFields.getFunctionName = engineSite.getFunctionName;
siteFields.getLineNumber = engineSite.getLineNumber;
siteFields.getColumnNumber = engineSite.getColumnNumber;
siteFields.isNative = engineSite.isNative;
siteFields.isConstructor = engineSite.isConstructor;
const siteFieldNames = ObjectKeys(siteFields);
// The safe call sites' prototype and their fields, built the first time a cell installs a
// prepareStackTrace function: most cells never do, and building them here cost 1.6% of a fresh
// engine's instructions.  Only captured built-ins go into them, so building them then is as safe
// as building them here.
/** @type {WeakMap<object, Record<string, unknown>> | null} */
let siteData = null; // safe call site -> its fields
/** @type {object | null} */
let safeSiteProto = null;
/**
 * @param {object} site
 * @param {string} name
 * @returns {unknown}
 */
function siteField(site, name) {
  const data = ReflectApply(weakMapGet, siteData, [site]);
  return data === undefined ? undefined : data[name];
}
function buildSafeSites() {
  /** @type {WeakMap<object, Record<string, unknown>>} */
  const data = new WeakMapCtor();
  /** @type {Record<string, (this: object) => unknown>} */
  const proto = ObjectCreate(null);
  for (let i = 0; i < siteFieldNames.length; i++) {
    const name = siteFieldNames[i];
    proto[name] = function () { return siteField(this, name); };
  }
  proto.getFunction = function getFunction() { return undefined; };
  proto.getThis = function getThis() { return undefined; };
  proto.getTypeName = function getTypeName() { return null; };
  proto.toString = function toString() {
    const name = siteField(this, "getFunctionName");
    const where = siteField(this, "isNative") ? "native" :
      siteField(this, "getFileName") + ":" + siteField(this, "getLineNumber") + ":" + siteField(this, "getColumnNumber");
    return name ? name + " (" + where + ")" : where;
  };
  ObjectFreeze(proto);
  // Published whole or not at all: a build cut short (stack or heap) leaves none to half-use.
  siteData = data;
  safeSiteProto = proto;
}
/** @type {unknown} */
let cellPrepare; // what the cell assigned to Error.prepareStackTrace
/**
 * @param {Error} error
 * @param {CallSite[]} sites
 * @returns {unknown}
 */
function prepareWithSafeSites(error, sites) {
  /** @type {object[]} */
  const out = newList();
  for (let i = 0; i < sites.length; i++) {
    const site = sites[i];
    // Prelude frames have an empty file name: its bytecode is stored without debug info.
    if (ReflectApply(siteFields.getFileName, site, []) === "") continue;
    /** @type {Record<string, unknown>} */
    const data = ObjectCreate(null);
    for (let j = 0; j < siteFieldNames.length; j++) data[siteFieldNames[j]] = ReflectApply(siteFields[siteFieldNames[j]], site, []);
    const safe = ObjectFreeze(ObjectCreate(safeSiteProto));
    ReflectApply(weakMapSet, siteData, [safe, data]);
    out[out.length] = safe;
  }
  // Installed only while cellPrepare is a function (the setter below).
  return ReflectApply(/** @type {Function} */ (cellPrepare), ErrorCtor, [error, ObjectFreeze(toArray(out))]);
}
defineProperty(ErrorCtor, "prepareStackTrace", {
  get: function () { return cellPrepare; },
  set: /** @param {unknown} v */ function (v) {
    if (typeof v === "function" && safeSiteProto === null) buildSafeSites();
    cellPrepare = v;
    ReflectApply(enginePrepareSet, ErrorCtor, [typeof v === "function" ? prepareWithSafeSites : undefined]);
  },
  enumerable: false,
  configurable: false,
});
