// @ts-check
// The guest's namespaces of host services: tools, catalog, MCP, API, results, store.

/**
 * A tool handle's metadata as the host sends it (in the configuration or a search reply); an MCP
 * tool's also names its server and tool identifiers in `mcp`, which the cell does not see.
 * @typedef {{callableName: string, source?: string, mcp?: [string, string]} & Record<string, unknown>} HandleMeta
 */

/**
 * @template T
 * @param {T} o
 * @returns {T}
 */
function freezeDeep(o) {
  if (o !== null && typeof o === "object") {
    const keys = ObjectKeys(o);
    for (let i = 0; i < keys.length; i++) freezeDeep((/** @type {Record<string, unknown>} */ (o))[keys[i]]);
    ObjectFreeze(o);
  }
  return o;
}
/** @param {HandleMeta} meta */
function makeHandle(meta) {
  const callable = meta.callableName;
  /** @type {(input?: unknown) => Promise<unknown>} */
  let fn;
  if (meta.source === "mcp") {
    const parts = /** @type {[string, string]} */ (meta.mcp); // [server identifier, tool identifier]
    fn = function (input) { return request("mcp.call", [parts[0], parts[1], input, mcpArgc(input, arguments.length)]); };
  } else {
    // The arguments are [callable, input]: the name's JSON is made once, here, not per call.
    const head = "[" + JSONStringify(callable) + ",";
    fn = function (input) { return /** @type {Promise<unknown>} */ (send("tool", head, 2, input === undefined ? {} : input, false)); };
  }
  // `meta` is the prelude's own parse of host JSON (the configuration or a search reply), held by
  // nothing the cell can reach: it is frozen in place, not copied (a copy cost more than the rest).
  const frozen = freezeDeep(meta);
  /** @type {Record<string, unknown>} */
  const visible = ObjectCreate(null);
  const keys = ObjectKeys(frozen);
  for (let i = 0; i < keys.length; i++) {
    if (keys[i] === "mcp") continue;
    visible[keys[i]] = frozen[keys[i]];
    defineProperty(fn, keys[i], { value: frozen[keys[i]], enumerable: true });
  }
  ObjectFreeze(visible);
  defineProperty(fn, "describe", { value: function describe() { return request("describe", [callable]); } });
  defineProperty(fn, "toJSON", { value: function toJSON() { return visible; } });
  ReflectApply(weakMapSet, handles, [fn, visible]);
  return ObjectFreeze(fn);
}

/** @param {HandleMeta[]} list */
function installTools(list) {
  /** @type {Function[]} */
  const all = [];
  for (let i = 0; i < list.length; i++) {
    const h = makeHandle(list[i]);
    all[all.length] = h;
    defineProperty(G, list[i].callableName, { value: h, writable: false, enumerable: false, configurable: false });
  }
  ObjectFreeze(all);
  const catalog = ObjectFreeze({
    all: function all_() { return all; },
    /**
     * @param {unknown} query
     * @param {{limit?: unknown} | null} [options]
     */
    search: function search(query, options) {
      if (typeof query !== "string") return NativePromise.reject(new TypeErrorCtor("catalog.search(query) needs a string query"));
      let limit = null;
      if (options !== undefined && options !== null && options.limit !== undefined) limit = options.limit;
      return chain(request("search", [query, limit]), /** @param {HandleMeta[]} metas */ function (metas) {
        /** @type {Function[]} */
        const out = newList();
        for (let i = 0; i < metas.length; i++) out[i] = makeHandle(metas[i]);
        return ObjectFreeze(toArray(out));
      });
    },
  });
  defineProperty(G, "catalog", { value: catalog, enumerable: false });
}

// `MCP.s.t()` and `MCP.s.t(undefined)` both mean the empty input.
/**
 * @param {unknown} input
 * @param {number} count
 */
function mcpArgc(input, count) {
  return input === undefined && count <= 1 ? 0 : count;
}

// `list({cursor})`: the page after the one whose `nextCursor` this is; no argument is the first page.
/** @param {{cursor?: unknown} | null} [params] */
function mcpCursor(params) {
  return params !== null && typeof params === "object" && params.cursor !== undefined ? params.cursor : null;
}

/**
 * @param {string} sid
 * @param {string} tid
 */
function mcpTool(sid, tid) {
  return /** @param {unknown} [input] */ function (input) {
    return request("mcp.call", [sid, tid, input, mcpArgc(input, arguments.length)]);
  };
}

// `MCP.<sid>`: $api, one function per listed tool, resources and prompts (frozen).
/**
 * @param {string} sid
 * @param {string[]} tools
 * @returns {Readonly<Record<string, unknown>>}
 */
function mcpNamespace(sid, tools) {
  /** @type {Record<string, unknown>} */
  const ns = ObjectCreate(null);
  defineProperty(ns, "$api", { value: /** @param {unknown} [tool] @param {unknown} [options] */ function $api(tool, options) {
    return request("mcp.api", [sid, tool === undefined ? null : tool, options === undefined ? null : options]);
  } });
  for (let j = 0; j < tools.length; j++) ns[tools[j]] = mcpTool(sid, tools[j]);
  ns.resources = ObjectFreeze({
    list: /** @param {{cursor?: unknown} | null} [params] */ function list(params) { return request("mcp.resources.list", [sid, mcpCursor(params)]); },
    templates: /** @param {{cursor?: unknown} | null} [params] */ function templates(params) { return request("mcp.resources.templates", [sid, mcpCursor(params)]); },
    /** @param {{uri?: unknown} | string} uri */
    read: function read(uri) {
      const u = uri !== null && typeof uri === "object" ? uri.uri : uri;
      return request("mcp.resources.read", [sid, u]);
    },
  });
  ns.prompts = ObjectFreeze({
    list: /** @param {{cursor?: unknown} | null} [params] */ function list(params) { return request("mcp.prompts.list", [sid, mcpCursor(params)]); },
    /**
     * @param {{name?: unknown, arguments?: unknown} | string} name
     * @param {unknown} [args]
     */
    get: function get(name, args) {
      if (name !== null && typeof name === "object") return request("mcp.prompts.get", [sid, name.name, name.arguments === undefined ? {} : name.arguments]);
      return request("mcp.prompts.get", [sid, name, args === undefined ? {} : args]);
    },
  });
  return ObjectFreeze(ns);
}

// A configured server that could not be reached when the cell started has a namespace whose tools
// are not known yet: any member is a tool call, which the host sends once the server is back (or
// rejects naming the server while it is down). `then` stays undefined so the namespace is no thenable.
/** @param {string} sid */
function unreachedServer(sid) {
  return new Proxy(mcpNamespace(sid, []), {
    get: function (target, key) {
      if (typeof key !== "string" || key === "then" || key === "toJSON") return undefined;
      const own = target[key];
      return own !== undefined ? own : mcpTool(sid, key);
    },
  });
}

/**
 * @param {{identifier: string, tools: string[]}[]} servers
 * @param {{identifier: string}[]} down
 */
function installMcp(servers, down) {
  /** @type {Record<string, unknown>} */
  const root = ObjectCreate(null);
  for (let i = 0; i < down.length; i++) root[down[i].identifier] = unreachedServer(down[i].identifier);
  defineProperty(root, "$api", { value: function $api() { return request("mcp.api", [null, null, null]); }, enumerable: false });
  for (let i = 0; i < servers.length; i++) root[servers[i].identifier] = mcpNamespace(servers[i].identifier, servers[i].tools);
  defineProperty(G, "MCP", { value: ObjectFreeze(root), enumerable: false });
}

function installData() {
  defineProperty(G, "API", { value: ObjectFreeze({
    list: /** @param {unknown} [prefix] */ function list(prefix) { return request("api.list", [prefix === undefined ? null : prefix]); },
    read: /** @param {unknown} path */ function read(path) { return request("api.read", [path]); },
  }), enumerable: false });
  defineProperty(G, "results", { value: ObjectFreeze({
    save: /** @param {unknown} value */ function save(value) { return request("results.save", [value]); },
    load: /** @param {unknown} id */ function load(id) { return request("results.load", [id]); },
    delete: /** @param {unknown} id */ function delete_(id) { return request("results.delete", [id]); },
  }), enumerable: false });
  defineProperty(G, "store", { value: /** @param {unknown} key @param {unknown} [value] */ function store(key, value) {
    if (typeof key !== "string" || key.length < 1 || key.length > 256) {
      return NativePromise.reject(new TypeErrorCtor("store key must be a string of 1-256 characters"));
    }
    if (value === undefined) return request("store.delete", [key]);
    return request("store.set", [key, value]);
  }, enumerable: false });
  defineProperty(G, "load", { value: /** @param {unknown} key */ function load(key) {
    if (typeof key !== "string" || key.length < 1 || key.length > 256) {
      return NativePromise.reject(new TypeErrorCtor("store key must be a string of 1-256 characters"));
    }
    return chain(request("store.get", [key]), function (r) {
      return r === null ? undefined : r.value;
    });
  }, enumerable: false });
}
