// The playground's editor: CodeMirror 6 with JavaScript/TypeScript or Python highlighting, line numbers,
// and completion of the names a cell can call (the key's tools, MCP.<server>.<tool>, the guest API), which
// the page reads from the declaration files it already has. Bundled by build.sh into ../static/editor.js,
// the global CodemodeEditor; playground.js uses it when it is there and keeps its <textarea> otherwise.
import { autocompletion } from "@codemirror/autocomplete";
import { javascript } from "@codemirror/lang-javascript";
import { python } from "@codemirror/lang-python";
import { Compartment } from "@codemirror/state";
import { EditorView, basicSetup } from "codemirror";

const GUEST_API = {
  javascript: [
    ["text", "text(value): append text to the output"],
    ["json", "json(value): append a JSON entry to the output"],
    ["console.log", "console.log(...values)"],
    ["catalog.search", "await catalog.search(query, {limit})"],
    ["catalog.all", "await catalog.all()"],
    ["API.list", "await API.list(): the declaration files"],
    ["API.read", 'await API.read("tools/<name>.d.ts")'],
    ["results.save", "await results.save(value): a reference"],
    ["results.load", "await results.load(id)"],
    ["store", "await store(key, value)"],
    ["load", "await load(key)"],
    ["yield_control", "await yield_control(reason)"],
  ],
  python: [
    ["text", "text(value)"],
    ["json", "json(value)"],
    ["print", "print(...)"],
    ["store", "await store(key, value)"],
    ["load", "await load(key)"],
    ["sleep", "await sleep(seconds)"],
    ["yield_control", "await yield_control()"],
    ["API.read", 'await API.read("tools/<name>.pyi")'],
  ],
};

// The dotted name being typed before the cursor: `quote_`, `MCP.tra`, `catalog.se`.
const WORD = /[\w$]+(?:\.[\w$]*)*$/;

function completer(state) {
  return (context) => {
    const before = context.matchBefore(WORD);
    if (!before || (before.from === before.to && !context.explicit)) return null;
    const names = [...GUEST_API[state.language], ...state.names];
    return {
      from: before.from,
      options: names.map(([label, detail]) => ({ label, detail, type: label.includes(".") ? "method" : "function" })),
      validFor: WORD,
    };
  };
}

// One editor in `parent`; `textarea` stays the page's source of truth (its value follows every edit).
// `nonce`: the page's style nonce (its CSP allows style elements that carry it): CodeMirror's themes
// are style elements it writes at run time.
export function create(parent, textarea, language, nonce) {
  const state = { language, names: [] };
  const mode = new Compartment();
  const grammar = (lang) => (lang === "python" ? python() : javascript({ typescript: true }));
  const view = new EditorView({
    doc: textarea.value,
    parent,
    extensions: [
      nonce ? EditorView.cspNonce.of(nonce) : [],
      basicSetup,
      mode.of(grammar(language)),
      autocompletion({ override: [completer(state)] }),
      EditorView.updateListener.of((update) => {
        if (update.docChanged) textarea.value = update.state.doc.toString();
      }),
    ],
  });
  return {
    view,
    setCode(text) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    },
    insert(text) {
      const at = view.state.selection.main.head;
      view.dispatch({ changes: { from: at, insert: text }, selection: { anchor: at + text.length } });
      view.focus();
    },
    setLanguage(lang) {
      state.language = lang;
      view.dispatch({ effects: mode.reconfigure(grammar(lang)) });
    },
    // [[name, detail], ...]: the key's tools and MCP tools, as the declaration files name them.
    setNames(names) {
      state.names = names;
    },
  };
}
