// The guest's namespaces of host services: tools, catalog, MCP, API, results, store.

function freezeDeep(o) {
  if (o !== null && typeof o === "object") {
    const keys = ObjectKeys(o);
    for (let i = 0; i < keys.length; i++) freezeDeep(o[keys[i]]);
    ObjectFreeze(o);
  }
  return o;
}
function makeHandle(meta) {
  const callable = meta.callableName;
  let fn;
  if (meta.source === "mcp") {
    const parts = meta.mcp; // [server identifier, tool identifier]
    fn = function (input) { return request("mcp.call", [parts[0], parts[1], input, mcpArgc(input, arguments.length)]); };
  } else {
    // The arguments are [callable, input]: the name's JSON is made once, here, not per call.
    const head = "[" + JSONStringify(callable) + ",";
    fn = function (input) { return send("tool", head, 2, input === undefined ? {} : input, false); };
  }
  // `meta` is the prelude's own parse of host JSON (the configuration or a search reply), held by
  // nothing the cell can reach: it is frozen in place, not copied (a copy cost more than the rest).
  const frozen = freezeDeep(meta);
  const visible = ObjectCreate(null);
  const keys = ObjectKeys(frozen);
  for (let i = 0; i < keys.length; i++) {
    if (keys[i] === "mcp") continue;
    visible[keys[i]] = frozen[keys[i]];
    defineProperty(fn, keys[i], { value: frozen[keys[i]], enumerable: true });
  }
  ObjectFreeze(visible);
  defineProperty(fn, "describe", { value: function describe() { return request("describe", [meta.source === "mcp" ? callable : callable]); } });
  defineProperty(fn, "toJSON", { value: function toJSON() { return visible; } });
  ReflectApply(weakMapSet, handles, [fn, visible]);
  return ObjectFreeze(fn);
}

function installTools(list) {
  const all = [];
  for (let i = 0; i < list.length; i++) {
    const h = makeHandle(list[i]);
    all[all.length] = h;
    defineProperty(G, list[i].callableName, { value: h, writable: false, enumerable: false, configurable: false });
  }
  ObjectFreeze(all);
  const catalog = ObjectFreeze({
    all: function all_() { return all; },
    search: function search(query, options) {
      if (typeof query !== "string") return NativePromise.reject(new TypeErrorCtor("catalog.search(query) needs a string query"));
      let limit = null;
      if (options !== undefined && options !== null && options.limit !== undefined) limit = options.limit;
      return chain(request("search", [query, limit]), function (metas) {
        const out = newList();
        for (let i = 0; i < metas.length; i++) out[i] = makeHandle(metas[i]);
        return ObjectFreeze(toArray(out));
      });
    },
  });
  defineProperty(G, "catalog", { value: catalog, enumerable: false });
}

// `MCP.s.t()` and `MCP.s.t(undefined)` both mean the empty input.
function mcpArgc(input, count) {
  return input === undefined && count <= 1 ? 0 : count;
}

// `list({cursor})`: the page after the one whose `nextCursor` this is; no argument is the first page.
function mcpCursor(params) {
  return params !== null && typeof params === "object" && params.cursor !== undefined ? params.cursor : null;
}

function mcpTool(sid, tid) {
  return function (input) {
    return request("mcp.call", [sid, tid, input, mcpArgc(input, arguments.length)]);
  };
}

// `MCP.<sid>`: $api, one function per listed tool, resources and prompts (frozen).
function mcpNamespace(sid, tools) {
  const ns = ObjectCreate(null);
  defineProperty(ns, "$api", { value: function $api(tool, options) {
    return request("mcp.api", [sid, tool === undefined ? null : tool, options === undefined ? null : options]);
  } });
  for (let j = 0; j < tools.length; j++) ns[tools[j]] = mcpTool(sid, tools[j]);
  ns.resources = ObjectFreeze({
    list: function list(params) { return request("mcp.resources.list", [sid, mcpCursor(params)]); },
    templates: function templates(params) { return request("mcp.resources.templates", [sid, mcpCursor(params)]); },
    read: function read(uri) {
      const u = uri !== null && typeof uri === "object" ? uri.uri : uri;
      return request("mcp.resources.read", [sid, u]);
    },
  });
  ns.prompts = ObjectFreeze({
    list: function list(params) { return request("mcp.prompts.list", [sid, mcpCursor(params)]); },
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
function unreachedServer(sid) {
  return new Proxy(mcpNamespace(sid, []), {
    get: function (target, key) {
      if (typeof key !== "string" || key === "then" || key === "toJSON") return undefined;
      const own = target[key];
      return own !== undefined ? own : mcpTool(sid, key);
    },
  });
}

function installMcp(servers, down) {
  const root = ObjectCreate(null);
  for (let i = 0; i < down.length; i++) root[down[i].identifier] = unreachedServer(down[i].identifier);
  defineProperty(root, "$api", { value: function $api() { return request("mcp.api", [null, null, null]); }, enumerable: false });
  for (let i = 0; i < servers.length; i++) root[servers[i].identifier] = mcpNamespace(servers[i].identifier, servers[i].tools);
  defineProperty(G, "MCP", { value: ObjectFreeze(root), enumerable: false });
}

function installData() {
  defineProperty(G, "API", { value: ObjectFreeze({
    list: function list(prefix) { return request("api.list", [prefix === undefined ? null : prefix]); },
    read: function read(path) { return request("api.read", [path]); },
  }), enumerable: false });
  defineProperty(G, "results", { value: ObjectFreeze({
    save: function save(value) { return request("results.save", [value]); },
    load: function load(id) { return request("results.load", [id]); },
    delete: function delete_(id) { return request("results.delete", [id]); },
  }), enumerable: false });
  defineProperty(G, "store", { value: function store(key, value) {
    if (typeof key !== "string" || key.length < 1 || key.length > 256) {
      return NativePromise.reject(new TypeErrorCtor("store key must be a string of 1-256 characters"));
    }
    if (value === undefined) return request("store.delete", [key]);
    return request("store.set", [key, value]);
  }, enumerable: false });
  defineProperty(G, "load", { value: function load(key) {
    if (typeof key !== "string" || key.length < 1 || key.length > 256) {
      return NativePromise.reject(new TypeErrorCtor("store key must be a string of 1-256 characters"));
    }
    return chain(request("store.get", [key]), function (r) {
      return r === null ? undefined : r.value;
    });
  }, enumerable: false });
}
