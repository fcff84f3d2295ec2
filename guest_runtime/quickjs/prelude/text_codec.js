// @ts-check
// TextEncoder / TextDecoder (UTF-8 only; the engine ships neither).

const Uint8ArrayCtor = Uint8Array;
const fromCharCode = String.fromCharCode;
class TextEncoder {
  get encoding() { return "utf-8"; }
  /**
   * @param {unknown} [input]
   * @returns {Uint8Array}
   */
  encode(input) {
    const str = input === undefined ? "" : StringCtor(input);
    const out = new Uint8ArrayCtor(str.length * 3);
    const r = this.encodeInto(str, out);
    return out.slice(0, r.written);
  }
  /**
   * @param {unknown} input
   * @param {Uint8Array} dest
   * @returns {{read: number, written: number}}
   */
  encodeInto(input, dest) {
    const str = StringCtor(input);
    let read = 0;
    let w = 0;
    const n = dest.length;
    for (let i = 0; i < str.length; i++) {
      let c = ReflectApply(stringCharCodeAt, str, [i]);
      let units = 1;
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < str.length) {
        const d = ReflectApply(stringCharCodeAt, str, [i + 1]);
        if (d >= 0xdc00 && d <= 0xdfff) { c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00); units = 2; }
      }
      if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
      const size = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
      if (w + size > n) break;
      if (size === 1) dest[w++] = c;
      else if (size === 2) { dest[w++] = 0xc0 | (c >> 6); dest[w++] = 0x80 | (c & 63); }
      else if (size === 3) { dest[w++] = 0xe0 | (c >> 12); dest[w++] = 0x80 | ((c >> 6) & 63); dest[w++] = 0x80 | (c & 63); }
      else { dest[w++] = 0xf0 | (c >> 18); dest[w++] = 0x80 | ((c >> 12) & 63); dest[w++] = 0x80 | ((c >> 6) & 63); dest[w++] = 0x80 | (c & 63); }
      read += units;
      if (units === 2) i++;
    }
    return { read: read, written: w };
  }
}
class TextDecoder {
  /**
   * @param {unknown} [label]
   * @param {{fatal?: unknown, ignoreBOM?: unknown} | null} [options]
   */
  constructor(label, options) {
    const l = label === undefined ? "utf-8" : StringCtor(label).toLowerCase().trim();
    if (l !== "utf-8" && l !== "utf8" && l !== "unicode-1-1-utf-8") throw new RangeErrorCtor("TextDecoder supports only utf-8, not " + l);
    this._fatal = !!(options && options.fatal);
    this._ignoreBOM = !!(options && options.ignoreBOM);
  }
  get encoding() { return "utf-8"; }
  get fatal() { return this._fatal; }
  get ignoreBOM() { return this._ignoreBOM; }
  /**
   * @param {unknown} [input]
   * @returns {string}
   */
  decode(input) {
    if (input === undefined) return "";
    let bytes;
    if (input instanceof ArrayBuffer) bytes = new Uint8ArrayCtor(input);
    else if (ArrayBuffer.isView(input)) bytes = new Uint8ArrayCtor(input.buffer, input.byteOffset, input.byteLength);
    else throw new TypeErrorCtor("TextDecoder.decode needs an ArrayBuffer or a typed array");
    /** @type {string[]} */
    const parts = newList();
    /** @type {number[]} */
    let chunk = newList();
    const fatal = this._fatal;
    let i = 0;
    if (!this._ignoreBOM && bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) i = 3;
    const n = bytes.length;
    function bad() {
      if (fatal) throw new TypeErrorCtor("The encoded data was not valid utf-8");
      chunk[chunk.length] = 0xfffd;
    }
    while (i < n) {
      const b = bytes[i];
      let cp = -1;
      let need = 0;
      if (b < 0x80) { cp = b; need = 0; }
      else if (b >= 0xc2 && b <= 0xdf) { cp = b & 31; need = 1; }
      else if (b >= 0xe0 && b <= 0xef) { cp = b & 15; need = 2; }
      else if (b >= 0xf0 && b <= 0xf4) { cp = b & 7; need = 3; }
      else { bad(); i++; continue; }
      let j = 1;
      for (; j <= need; j++) {
        const c = bytes[i + j];
        if (i + j >= n || (c & 0xc0) !== 0x80) break;
        if (j === 1 && ((b === 0xe0 && c < 0xa0) || (b === 0xed && c > 0x9f) || (b === 0xf0 && c < 0x90) || (b === 0xf4 && c > 0x8f))) break;
        cp = (cp << 6) | (c & 63);
      }
      if (j <= need) { bad(); i += j; continue; }
      i += need + 1;
      if (cp >= 0x10000) {
        cp -= 0x10000;
        chunk[chunk.length] = 0xd800 + (cp >> 10);
        chunk[chunk.length] = 0xdc00 + (cp & 1023);
      } else chunk[chunk.length] = cp;
      if (chunk.length >= 4096) { parts[parts.length] = ReflectApply(fromCharCode, undefined, chunk); chunk = newList(); }
    }
    if (chunk.length) parts[parts.length] = ReflectApply(fromCharCode, undefined, chunk);
    return ReflectApply(arrayJoin, parts, [""]);
  }
}
