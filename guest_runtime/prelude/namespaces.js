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
    fn = function (input) { return request("tool", [callable, input === undefined ? {} : input]); };
  }
  const metaCopy = freezeDeep(JSONParse(JSONStringify(meta)));
  const visible = ObjectCreate(null);
  const keys = ObjectKeys(metaCopy);
  for (let i = 0; i < keys.length; i++) {
    if (keys[i] === "mcp") continue;
    visible[keys[i]] = metaCopy[keys[i]];
    defineProperty(fn, keys[i], { value: metaCopy[keys[i]], enumerable: true });
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

// A configured server that is down still has a namespace: every call on it rejects with an
// error naming the server, instead of a TypeError about an undefined property.
function unavailableServer(name) {
  function refuse() {
    return NativePromise.reject(makeError({
      name: "Error", code: "mcp_unavailable",
      message: "MCP server '" + name + "' is unavailable: it could not be reached when this cell started; retry in a later cell",
    }));
  }
  refuse.list = refuse;
  refuse.templates = refuse;
  refuse.read = refuse;
  refuse.get = refuse;
  return new Proxy(ObjectCreate(null), {
    get: function (target, key) { return typeof key === "string" ? refuse : undefined; },
  });
}

function installMcp(servers, down) {
  const root = ObjectCreate(null);
  for (let i = 0; i < down.length; i++) root[down[i].identifier] = unavailableServer(down[i].serverName);
  defineProperty(root, "$api", { value: function $api() { return request("mcp.api", [null, null, null]); }, enumerable: false });
  for (let i = 0; i < servers.length; i++) {
    const s = servers[i];
    const ns = ObjectCreate(null);
    const sid = s.identifier;
    defineProperty(ns, "$api", { value: function $api(tool, options) {
      return request("mcp.api", [sid, tool === undefined ? null : tool, options === undefined ? null : options]);
    } });
    for (let j = 0; j < s.tools.length; j++) {
      const tid = s.tools[j];
      ns[tid] = function (input) {
        return request("mcp.call", [sid, tid, input, mcpArgc(input, arguments.length)]);
      };
    }
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
    root[sid] = ObjectFreeze(ns);
  }
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
