"""A cell that tries every stack-frame path to a function of the guest prelude (guest hardening: the prelude stays out of reach).

It installs ``Error.prepareStackTrace`` and makes errors inside every kind of frame the prelude
can put on the stack: cell code, prelude code the cell called, the host hook settling a reply
(rejection and thenable lookup), timers, the final value's getters and proxy traps, and
``describeThrown``.  Every ``getFunction()`` / ``getThis()`` result and every ``caller`` /
``arguments.callee.caller`` seen is recorded.  The cell's value is read from getter ``b`` of the
returned object, after getter ``a`` probed from inside the host's "value" call.
"""

PROBE = r"""
const seen = { types: [], names: [], sites: 0, callers: [], hook: false, descriptor: null, redefine: null };
function note(v) {
  seen.types.push(typeof v);
  if (typeof v === 'function' && v.name === 'codemodeHostHook') seen.hook = true;
}
Error.prepareStackTrace = function (error, sites) {
  for (const s of sites) {
    seen.sites++;
    note(s.getFunction());
    if (typeof s.getThis === 'function') note(s.getThis());
    seen.names.push(String(s.getFunctionName()));
  }
  return 'stack';
};
function probe(where) {
  void new Error(where).stack;
  const o = {};
  Error.captureStackTrace(o);
  void o.stack;
}
function sloppyCaller() {
  try { seen.callers.push(typeof sloppyCaller.caller); } catch (e) { seen.callers.push('throws'); }
  try { seen.callers.push(typeof arguments.callee.caller); } catch (e) { seen.callers.push('throws'); }
}
const d = Object.getOwnPropertyDescriptor(Error, 'prepareStackTrace');
seen.descriptor = [d.configurable, typeof d.get, typeof d.set, Error.prepareStackTrace === undefined];
try { Object.defineProperty(Error, 'prepareStackTrace', { value: 1 }); seen.redefine = 'redefined'; }
catch (e) { seen.redefine = e.name; }
probe('cell');
try { await results.save(10n); } catch (e) { void e.stack; }
try { await results.load('result_missing'); } catch (e) { void e.stack; }
Object.defineProperty(Object.prototype, 'then', {
  get() { probe('thenable'); sloppyCaller(); return undefined; }, configurable: true,
});
await results.save(1).catch(() => 0);
delete Object.prototype.then;
await new Promise(resolve => setTimeout(function () { probe('timer'); sloppyCaller(); resolve(); }, 1));
const thrown = { get name() { probe('describe'); return 'X'; }, message: 'm' };
Object.setPrototypeOf(thrown, Error.prototype);
void Promise.reject(thrown).catch(() => 0);
const trapped = new Proxy({}, { ownKeys() { probe('trap'); return []; } });
return {
  get a() { probe('value getter'); sloppyCaller(); return trapped; },
  get b() { return seen; },
};
"""

#: Names of prelude functions that would appear if prelude frames reached prepareStackTrace.
PRELUDE_NAMES = {
    "codemodeHostHook",
    "settle",
    "makeError",
    "serialise",
    "walk",
    "isPlain",
    "request",
    "take",
    "finish",
    "describeThrown",
    "chain",
    "prepareWithSafeSites",
}


def check_report(report: dict) -> None:
    """Assert that the probe found no function, no prelude frame, and a locked accessor."""
    assert report["sites"] > 0, report
    assert set(report["types"]) == {"undefined"}, report["types"]
    assert report["hook"] is False
    assert not PRELUDE_NAMES & set(report["names"]), report["names"]
    assert set(report["callers"]) <= {"undefined", "throws"}, report["callers"]
    assert report["descriptor"] == [False, "function", "function", False]
    assert report["redefine"] == "TypeError"
