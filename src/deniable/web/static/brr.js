// brr.js — on-device runtime for deniable's BRR bundles (ES module, no dependencies).
//
// Privatizes text in the browser (or Node >= 18), so the raw text never leaves the device
// (BRR paper §1, the zero-trust model). It reads the versioned bundle of docs/bundle_format.md
// and follows the same sampling procedure as deniable's Python runtime (brr_runtime.py):
//
//   Mechanism (BRR paper Algorithm 3): every bit of a word's binary code flips independently
//   with probability p = 1/(1 + e^ε) (randomized response, Algorithm 2); the output is the
//   vocabulary word whose code is nearest in Hamming distance, ties broken uniformly at random.
//   Guarantee (Theorem 3): ε·d-privacy, d = Hamming distance between codes, over the bundle's
//   vocabulary ∪ {UNK}. Every out-of-vocabulary word is privatized as the bundle's UNK code:
//   no input word is ever copied to the output.
//
//   Text: separators (whitespace and Unicode punctuation, the exact table of the Python side,
//   generated below) pass through; words are maximal runs of every other character. Lookup keys
//   are NFC-normalized and lower-cased for an uncased vocabulary; the output word takes the
//   input word's case pattern (lower / Title / UPPER).
//
//   Randomness, in the order consumed: words in chunks of 4096; per chunk of m words, m·n_bits
//   uniforms (word-major: bit j of word i flips iff U[i·n_bits + j] < p), then m uniforms T;
//   word i outputs the tied nearest code of rank floor(T[i]·C) (C tied codes, ascending ids).
//   The default source is crypto.getRandomValues (53-bit uniforms). Options accept
//   `random(n) -> Float64Array` to inject a stream: given numpy's stream for a seed, the output
//   equals the Python runtime's for that seed (that is how the tests compare them).
//
// Usage:
//   import { loadBundle } from "./brr.js";
//   const bundle = await loadBundle("/v1/bundles/brr");   // fetched once, SHA-256 checked
//   const out = bundle.privatize("Meet me at noon", 0.5);  // ε per bit of Hamming distance

export const MAGIC = [0x89, 0x44, 0x4e, 0x42, 0x52, 0x52, 0x0d, 0x0a];
export const VERSION = 1;
export const CHUNK = 4096;
const MAX_BITS = 65535;
const DIGEST = 32;

// BEGIN GENERATED SEPARATORS (python -m deniable.web._tables; Unicode 14.0.0)
const SEPARATOR_CLASS =
  "\\u{9}-\\u{d}\\u{1c}-\\u{23}\\u{25}-\\u{2a}\\u{2c}-\\u{2f}\\u{3a}-\\u{3b}\\u{3f}-\\u{40}" +
  "\\u{5b}-\\u{5d}\\u{5f}\\u{7b}\\u{7d}\\u{85}\\u{a0}-\\u{a1}\\u{a7}\\u{ab}\\u{b6}-\\u{b7}\\u{bb}" +
  "\\u{bf}\\u{37e}\\u{387}\\u{55a}-\\u{55f}\\u{589}-\\u{58a}\\u{5be}\\u{5c0}\\u{5c3}\\u{5c6}" +
  "\\u{5f3}-\\u{5f4}\\u{609}-\\u{60a}\\u{60c}-\\u{60d}\\u{61b}\\u{61d}-\\u{61f}\\u{66a}-\\u{66d}" +
  "\\u{6d4}\\u{700}-\\u{70d}\\u{7f7}-\\u{7f9}\\u{830}-\\u{83e}\\u{85e}\\u{964}-\\u{965}\\u{970}" +
  "\\u{9fd}\\u{a76}\\u{af0}\\u{c77}\\u{c84}\\u{df4}\\u{e4f}\\u{e5a}-\\u{e5b}\\u{f04}-\\u{f12}" +
  "\\u{f14}\\u{f3a}-\\u{f3d}\\u{f85}\\u{fd0}-\\u{fd4}\\u{fd9}-\\u{fda}\\u{104a}-\\u{104f}\\u{10fb}" +
  "\\u{1360}-\\u{1368}\\u{1400}\\u{166e}\\u{1680}\\u{169b}-\\u{169c}\\u{16eb}-\\u{16ed}" +
  "\\u{1735}-\\u{1736}\\u{17d4}-\\u{17d6}\\u{17d8}-\\u{17da}\\u{1800}-\\u{180a}\\u{1944}-\\u{1945}" +
  "\\u{1a1e}-\\u{1a1f}\\u{1aa0}-\\u{1aa6}\\u{1aa8}-\\u{1aad}\\u{1b5a}-\\u{1b60}\\u{1b7d}-\\u{1b7e}" +
  "\\u{1bfc}-\\u{1bff}\\u{1c3b}-\\u{1c3f}\\u{1c7e}-\\u{1c7f}\\u{1cc0}-\\u{1cc7}\\u{1cd3}" +
  "\\u{2000}-\\u{200a}\\u{2010}-\\u{2029}\\u{202f}-\\u{2043}\\u{2045}-\\u{2051}\\u{2053}-\\u{205f}" +
  "\\u{207d}-\\u{207e}\\u{208d}-\\u{208e}\\u{2308}-\\u{230b}\\u{2329}-\\u{232a}\\u{2768}-\\u{2775}" +
  "\\u{27c5}-\\u{27c6}\\u{27e6}-\\u{27ef}\\u{2983}-\\u{2998}\\u{29d8}-\\u{29db}\\u{29fc}-\\u{29fd}" +
  "\\u{2cf9}-\\u{2cfc}\\u{2cfe}-\\u{2cff}\\u{2d70}\\u{2e00}-\\u{2e2e}\\u{2e30}-\\u{2e4f}" +
  "\\u{2e52}-\\u{2e5d}\\u{3000}-\\u{3003}\\u{3008}-\\u{3011}\\u{3014}-\\u{301f}\\u{3030}\\u{303d}" +
  "\\u{30a0}\\u{30fb}\\u{a4fe}-\\u{a4ff}\\u{a60d}-\\u{a60f}\\u{a673}\\u{a67e}\\u{a6f2}-\\u{a6f7}" +
  "\\u{a874}-\\u{a877}\\u{a8ce}-\\u{a8cf}\\u{a8f8}-\\u{a8fa}\\u{a8fc}\\u{a92e}-\\u{a92f}\\u{a95f}" +
  "\\u{a9c1}-\\u{a9cd}\\u{a9de}-\\u{a9df}\\u{aa5c}-\\u{aa5f}\\u{aade}-\\u{aadf}\\u{aaf0}-\\u{aaf1}" +
  "\\u{abeb}\\u{fd3e}-\\u{fd3f}\\u{fe10}-\\u{fe19}\\u{fe30}-\\u{fe52}\\u{fe54}-\\u{fe61}\\u{fe63}" +
  "\\u{fe68}\\u{fe6a}-\\u{fe6b}\\u{ff01}-\\u{ff03}\\u{ff05}-\\u{ff0a}\\u{ff0c}-\\u{ff0f}" +
  "\\u{ff1a}-\\u{ff1b}\\u{ff1f}-\\u{ff20}\\u{ff3b}-\\u{ff3d}\\u{ff3f}\\u{ff5b}\\u{ff5d}" +
  "\\u{ff5f}-\\u{ff65}\\u{10100}-\\u{10102}\\u{1039f}\\u{103d0}\\u{1056f}\\u{10857}\\u{1091f}" +
  "\\u{1093f}\\u{10a50}-\\u{10a58}\\u{10a7f}\\u{10af0}-\\u{10af6}\\u{10b39}-\\u{10b3f}" +
  "\\u{10b99}-\\u{10b9c}\\u{10ead}\\u{10f55}-\\u{10f59}\\u{10f86}-\\u{10f89}\\u{11047}-\\u{1104d}" +
  "\\u{110bb}-\\u{110bc}\\u{110be}-\\u{110c1}\\u{11140}-\\u{11143}\\u{11174}-\\u{11175}" +
  "\\u{111c5}-\\u{111c8}\\u{111cd}\\u{111db}\\u{111dd}-\\u{111df}\\u{11238}-\\u{1123d}\\u{112a9}" +
  "\\u{1144b}-\\u{1144f}\\u{1145a}-\\u{1145b}\\u{1145d}\\u{114c6}\\u{115c1}-\\u{115d7}" +
  "\\u{11641}-\\u{11643}\\u{11660}-\\u{1166c}\\u{116b9}\\u{1173c}-\\u{1173e}\\u{1183b}" +
  "\\u{11944}-\\u{11946}\\u{119e2}\\u{11a3f}-\\u{11a46}\\u{11a9a}-\\u{11a9c}\\u{11a9e}-\\u{11aa2}" +
  "\\u{11c41}-\\u{11c45}\\u{11c70}-\\u{11c71}\\u{11ef7}-\\u{11ef8}\\u{11fff}\\u{12470}-\\u{12474}" +
  "\\u{12ff1}-\\u{12ff2}\\u{16a6e}-\\u{16a6f}\\u{16af5}\\u{16b37}-\\u{16b3b}\\u{16b44}" +
  "\\u{16e97}-\\u{16e9a}\\u{16fe2}\\u{1bc9f}\\u{1da87}-\\u{1da8b}\\u{1e95e}-\\u{1e95f}";
// END GENERATED SEPARATORS

// Words (the Python tokenizer's pattern): a clitic after a stem ('s 'm 'd 're 'll 've n't, with
// ' or ’, any case), the stem before n't, or a run of characters that are not separators.
const W = "[^" + SEPARATOR_CLASS + "]";
const ENCLITIC = "['\u2019](?:[sS]|[mM]|[dD]|[rR][eE]|[lL][lL]|[vV][eE])";
const NEGATION = "[nN]['\u2019][tT]";
const END = "(?!" + W + ")";
const WORD_RE = new RegExp(
  "(" + W + "+?(?=" + NEGATION + END + ")|(?<=" + W + ")" + NEGATION + END + "|(?<=" + W + ")" + ENCLITIC + END + "|" + W + "+)",
  "u",
);
const CLITIC_RE = new RegExp("^(?:" + ENCLITIC + "|" + NEGATION + ")$", "u");
const CLITIC_LETTERS = new Map([["s", "'s"], ["m", "'m"], ["d", "'d"], ["re", "'re"], ["ll", "'ll"], ["ve", "'ve"], ["nt", "n't"]]);

/** `word` as a clitic written with `apostrophe` ("s" -> "'s", "nt" -> "n't"), or null. */
function cliticForm(word, apostrophe) {
  if (CLITIC_RE.test(word)) return word.replace(/['\u2019]/gu, apostrophe);
  const form = CLITIC_LETTERS.get(word.toLowerCase());
  if (form === undefined || word.length !== form.length - 1) return null;
  let k = 0;
  return Array.from(form, (ch) => (ch === "'" ? apostrophe : word[k++])).join("");
}
const HAS_LOWER_OR_TITLE = /[\p{Lowercase}\p{Lt}]/u;
const HAS_UPPER = /\p{Uppercase}/u;
const NON_ASCII = /[^\x00-\x7f]/;

/** The bundle is not valid (bad magic, unknown version, truncated, corrupted). */
export class BundleError extends Error {
  constructor(message) {
    super(message);
    this.name = "BundleError";
  }
}

/** Randomized-response flip probability 1/(1+e^ε), computed stably (Algorithm 2). */
export function flipProbability(epsilon) {
  const eps = Number(epsilon);
  if (typeof epsilon !== "number" || !Number.isFinite(eps) || eps <= 0) {
    throw new RangeError(`epsilon must be a finite number > 0, got ${epsilon}`);
  }
  const t = Math.exp(-eps);
  return t / (1 + t);
}

/** [sep, word, sep, ..., word, sep]: words at odd indices; joining gives back the text. */
export function splitWords(text) {
  return text.split(WORD_RE);
}

/** The words of a text, in order. */
export function wordsOf(text) {
  return splitWords(text).filter((_, i) => i % 2 === 1);
}

/** Vocabulary key: NFC-normalized, lower-cased when `lower`. */
export function lookupKey(word, lower) {
  const w = NON_ASCII.test(word) ? word.normalize("NFC") : word;
  return lower ? w.toLowerCase() : w;
}

function firstCodePoint(s) {
  return String.fromCodePoint(s.codePointAt(0));
}

function isUpper(s) {
  // Python's str.isupper: no lower/title-case character and at least one upper-case one
  return !HAS_LOWER_OR_TITLE.test(s) && HAS_UPPER.test(s);
}

/** "upper" (NASA), "title" (Paris, I) or "lower": the case pattern an output word takes. */
export function casePattern(token) {
  if (token.length && isUpper(firstCodePoint(token))) {
    return [...token].length > 1 && isUpper(token) ? "upper" : "title";
  }
  return "lower";
}

/** Give `word` the case `pattern` of casePattern. */
export function applyCase(word, pattern) {
  if (pattern === "upper") return word.toUpperCase();
  if (pattern === "title" && word.length) {
    const first = firstCodePoint(word);
    return first.toUpperCase() + word.slice(first.length);
  }
  return word;
}

/** n uniforms in [0, 1) with 53 random bits each, from crypto.getRandomValues. */
export function cryptoUniforms(n) {
  const out = new Float64Array(n);
  const words = new Uint32Array(Math.min(2 * n, 16384)); // 64 KiB: getRandomValues' limit per call
  let k = 0;
  while (k < n) {
    const take = Math.min(n - k, words.length / 2);
    globalThis.crypto.getRandomValues(words.subarray(0, 2 * take));
    for (let i = 0; i < take; i++) {
      out[k + i] = ((words[2 * i] >>> 5) * 67108864 + (words[2 * i + 1] >>> 6)) / 9007199254740992;
    }
    k += take;
  }
  return out;
}

function popcount32(x) {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  x = (x + (x >>> 4)) & 0x0f0f0f0f;
  return Math.imul(x, 0x01010101) >>> 24;
}

async function sha256(bytes) {
  const subtle = globalThis.crypto && globalThis.crypto.subtle;
  if (!subtle) throw new BundleError("SHA-256 needs crypto.subtle (a secure context: https or localhost)");
  return new Uint8Array(await subtle.digest("SHA-256", bytes));
}

/**
 * Validate and decode the bytes of a bundle (ArrayBuffer or Uint8Array).
 * Rejects, naming the reason, what docs/bundle_format.md says a reader must reject.
 */
export async function parseBundle(data, { name = "bundle" } = {}) {
  const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
  const size = bytes.length;
  if (size < 16) throw new BundleError(`${name}: truncated: ${size} bytes, shorter than the 16-byte preamble`);
  for (let i = 0; i < 8; i++) {
    if (bytes[i] !== MAGIC[i]) throw new BundleError(`${name}: not a BRR bundle (bad magic bytes)`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = view.getUint32(8, true);
  const hlen = view.getUint32(12, true);
  if (version !== VERSION) throw new BundleError(`${name}: unsupported bundle version ${version} (this runtime reads version ${VERSION})`);
  if (size < 16 + hlen + DIGEST) throw new BundleError(`${name}: truncated: ${size} bytes, the header alone needs ${16 + hlen + DIGEST}`);
  const digest = await sha256(bytes.subarray(0, size - DIGEST));
  for (let i = 0; i < DIGEST; i++) {
    if (digest[i] !== bytes[size - DIGEST + i]) throw new BundleError(`${name}: checksum mismatch: the file is corrupted or truncated`);
  }
  let header;
  try {
    header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(16, 16 + hlen)));
  } catch (e) {
    throw new BundleError(`${name}: the JSON header is unreadable (${e.message})`);
  }
  if (header === null || typeof header !== "object" || Array.isArray(header)) throw new BundleError(`${name}: the JSON header is not an object`);
  const need = ["n_words", "n_bits", "words_per_code", "vocab_bytes", "uncased"];
  for (const f of need) {
    if (!(f in header)) throw new BundleError(`${name}: the header lacks or has a bad field: '${f}'`);
  }
  const nWords = header.n_words, nBits = header.n_bits, wpc = header.words_per_code, vocabBytes = header.vocab_bytes;
  const ints = [nWords, nBits, wpc, vocabBytes].every((v) => Number.isInteger(v));
  if (!ints || nWords < 1 || nBits < 1 || nBits > MAX_BITS || wpc !== Math.ceil(nBits / 64) || vocabBytes < 0) {
    throw new BundleError(`${name}: inconsistent header: n_words=${nWords}, n_bits=${nBits}, words_per_code=${wpc}`);
  }
  let off = 16 + hlen;
  const expected = off + 8 * wpc * (nWords + 1) + vocabBytes + DIGEST;
  if (expected !== size) throw new BundleError(`${name}: size mismatch: the header describes ${expected} bytes but the file has ${size}`);
  const w32 = 2 * wpc; // a code as 32-bit halves, least significant first
  // signed 32-bit halves: V8 keeps them as small integers (unsigned values above 2^31 would be doubles)
  const codes = new Int32Array(nWords * w32);
  for (let i = 0; i < codes.length; i++) codes[i] = view.getInt32(off + 4 * i, true);
  off += 8 * wpc * nWords;
  const unk = new Int32Array(w32);
  for (let i = 0; i < w32; i++) unk[i] = view.getInt32(off + 4 * i, true);
  off += 8 * wpc;
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes.subarray(off, off + vocabBytes));
  } catch (e) {
    throw new BundleError(`${name}: the vocabulary is not valid UTF-8`);
  }
  const words = text.split("\n");
  if (words.length !== nWords) throw new BundleError(`${name}: the vocabulary has ${words.length} words, the header says ${nWords}`);
  if (nBits % (32 * w32) !== 0) {
    // bits >= nBits of each code must be 0: a mask per 32-bit half
    const pad = [];
    for (let k = 0; k < w32; k++) {
      const lo = 32 * k;
      pad.push(lo >= nBits ? 0xffffffff : lo + 32 > nBits ? ~((1 << (nBits - lo)) - 1) >>> 0 : 0);
    }
    const check = (arr, base) => pad.some((m, k) => (arr[base + k] & m) !== 0); // & gives int32 on both sides
    for (let i = 0; i < nWords; i++) {
      if (check(codes, i * w32)) throw new BundleError(`${name}: padding bits beyond n_bits=${nBits} are set`);
    }
    if (check(unk, 0)) throw new BundleError(`${name}: padding bits beyond n_bits=${nBits} are set`);
  }
  return new Bundle(header, codes, unk, words);
}

/** Fetch a bundle once and parse it (fetch options, e.g. headers with an API key, pass through). */
export async function loadBundle(url, init = {}) {
  const resp = await fetch(url, init);
  if (!resp.ok) throw new BundleError(`${url}: HTTP ${resp.status}`);
  return parseBundle(await resp.arrayBuffer(), { name: String(url) });
}

/** A loaded BRR bundle: vocabulary, codes, UNK code; privatizes text. */
export class Bundle {
  constructor(header, codes, unk, words) {
    this.header = header;
    this.codes = codes;
    this.unkCode = unk;
    this.words = words;
    this.nBits = header.n_bits;
    this.uncased = Boolean(header.uncased);
    this.w32 = 2 * header.words_per_code;
    this.index = new Map();
    words.forEach((w, i) => this.index.set(w, i)); // a repeated word maps to its last id, as in Python
  }

  get nWords() {
    return this.words.length;
  }

  /** Id of a word (-1 when out of vocabulary), looked up as the text path does. */
  idOf(word) {
    const id = this.index.get(lookupKey(word, this.uncased));
    return id === undefined ? -1 : id;
  }

  /** Privatize word ids (-1 = out of vocabulary, privatized as the UNK code): output ids. */
  sampleIds(ids, epsilon, { random = cryptoUniforms } = {}) {
    const p = flipProbability(epsilon);
    const { codes, unkCode, nBits, w32 } = this;
    const V = this.nWords;
    const out = new Int32Array(ids.length);
    const noisy = new Int32Array(w32);
    const tied = new Int32Array(V);
    for (let s = 0; s < ids.length; s += CHUNK) {
      const m = Math.min(CHUNK, ids.length - s);
      const U = random(m * nBits);
      const T = random(m);
      if (U.length < m * nBits || T.length < m) throw new RangeError("random(n) returned fewer than n uniforms");
      for (let i = 0; i < m; i++) {
        const id = ids[s + i];
        const base = id < 0 ? unkCode : codes.subarray(id * w32, (id + 1) * w32);
        noisy.set(base);
        const u0 = i * nBits;
        for (let j = 0; j < nBits; j++) {
          if (U[u0 + j] < p) noisy[j >>> 5] ^= 1 << (j & 31);
        }
        let best = nBits + 1;
        let count = 0;
        for (let v = 0, o = 0; v < V; v++, o += w32) {
          let d = 0;
          for (let k = 0; k < w32 && d <= best; k++) d += popcount32(noisy[k] ^ codes[o + k]);
          if (d > best) continue; // farther than the best so far (possibly abandoned early)
          if (d < best) {
            best = d;
            count = 0;
          }
          tied[count++] = v;
        }
        const rank = Math.min(Math.floor(T[i] * count), count - 1);
        out[s + i] = tied[rank];
      }
    }
    return out;
  }

  /**
   * Privatize texts and say which words changed: { texts, segments, words, unknown, changed }.
   * segments[i] is a list of {text, word, changed} pieces of output i (separators: word false).
   */
  privatizeDetailed(texts, epsilon, { random = cryptoUniforms, case: casing = "preserve" } = {}) {
    flipProbability(epsilon);
    const partsList = texts.map((t) => {
      if (typeof t !== "string") throw new TypeError(`texts must be strings, got ${typeof t}`);
      return splitWords(t);
    });
    const words = [];
    for (const parts of partsList) for (let i = 1; i < parts.length; i += 2) words.push(parts[i]);
    // a clitic is looked up as its form ('s), else as its letters (s)
    const keys = words.map((w) => (CLITIC_RE.test(w) ? w.toLowerCase().replace(/\u2019/gu, "'") : lookupKey(w, this.uncased)));
    const ids = Int32Array.from(keys, (k, i) => {
      let id = this.index.get(k);
      if (id === undefined && CLITIC_RE.test(words[i])) id = this.index.get(k.replace("'", ""));
      return id === undefined ? -1 : id;
    });
    const unknown = ids.reduce((n, id) => n + (id < 0 ? 1 : 0), 0);
    const chosen = words.length ? this.sampleIds(ids, epsilon, { random }) : new Int32Array(0);
    const outWords = Array.from(chosen, (j, i) => {
      const pattern = this.uncased && casing === "preserve" ? casePattern(words[i]) : "lower";
      if (!CLITIC_RE.test(words[i])) return applyCase(this.words[j], pattern);
      // in a clitic's place: the sampled word as a clitic, else after a space (never glued on)
      const form = cliticForm(this.words[j], words[i].includes("\u2019") ? "\u2019" : "'");
      return form === null ? " " + applyCase(this.words[j], pattern) : applyCase(form, pattern);
    });
    const flags = Array.from(chosen, (j, i) => j !== ids[i]);
    const outTexts = [];
    const segments = [];
    let k = 0;
    for (const parts of partsList) {
      const seg = [];
      for (let i = 0; i < parts.length; i++) {
        if (i % 2 === 1) {
          parts[i] = outWords[k];
          seg.push({ text: parts[i], word: true, changed: flags[k] });
          k++;
        } else if (parts[i]) {
          seg.push({ text: parts[i], word: false, changed: false });
        }
      }
      outTexts.push(parts.join(""));
      segments.push(seg);
    }
    return { texts: outTexts, segments, words: words.length, unknown, changed: flags.filter(Boolean).length };
  }

  /** Privatize a text (string) or a list of texts, word by word; separators pass through. */
  privatize(texts, epsilon, options = {}) {
    const single = typeof texts === "string";
    const res = this.privatizeDetailed(single ? [texts] : Array.from(texts), epsilon, options);
    return single ? res.texts[0] : res.texts;
  }
}
