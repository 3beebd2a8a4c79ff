// Test driver: runs brr.js in Node on a JSON job (argv[2] = brr.js path, argv[3] = job file)
// and prints a JSON result. Used by test_brr_js.py to compare with the Python runtime.
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";

const brr = await import(pathToFileURL(process.argv[2]).href);
const job = JSON.parse(readFileSync(process.argv[3], "utf-8"));

function streamFrom(path) {
  // float64 little-endian uniforms, consumed in order
  const buf = readFileSync(path);
  const all = new Float64Array(buf.buffer, buf.byteOffset, buf.byteLength / 8);
  let pos = 0;
  return (n) => {
    if (pos + n > all.length) throw new Error(`stream exhausted: asked ${n} at ${pos} of ${all.length}`);
    const out = all.subarray(pos, pos + n);
    pos += n;
    return out;
  };
}

async function run(job) {
  switch (job.op) {
    case "split":
      return job.texts.map((t) => brr.splitWords(t));
    case "case":
      return job.words.map((w) => [brr.lookupKey(w, true), brr.lookupKey(w, false), brr.casePattern(w), brr.applyCase(w.toLowerCase(), "upper"), brr.applyCase(w.toLowerCase(), "title")]);
    case "privatize": {
      const bundle = await brr.parseBundle(readFileSync(job.bundle));
      const opts = job.stream ? { random: streamFrom(job.stream) } : {};
      return bundle.privatizeDetailed(job.texts, job.epsilon, opts);
    }
    case "parse": {
      const out = [];
      for (const path of job.bundles) {
        try {
          const b = await brr.parseBundle(readFileSync(path), { name: "b" });
          out.push({ ok: true, words: b.nWords, nBits: b.nBits, uncased: b.uncased });
        } catch (e) {
          out.push({ ok: false, name: e.name, message: e.message });
        }
      }
      return out;
    }
    case "draw": {
      const bundle = await brr.parseBundle(readFileSync(job.bundle));
      const ids = new Int32Array(job.n).fill(job.id);
      const opts = job.stream ? { random: streamFrom(job.stream) } : {};
      const out = bundle.sampleIds(ids, job.epsilon, opts);
      const counts = new Array(bundle.nWords).fill(0);
      for (const j of out) counts[j]++;
      return counts;
    }
    case "casemap": {
      // every code point whose single-character lower or upper mapping is not itself
      const out = [];
      for (let cp = 0; cp <= 0x10ffff; cp++) {
        if (cp >= 0xd800 && cp <= 0xdfff) continue;
        const c = String.fromCodePoint(cp);
        const lo = c.toLowerCase(), up = c.toUpperCase();
        if (lo !== c || up !== c) out.push([cp, lo, up]);
      }
      return out;
    }
    case "uniforms":
      return Array.from(brr.cryptoUniforms(job.n));
    default:
      throw new Error(`unknown op ${job.op}`);
  }
}

process.stdout.write(JSON.stringify(await run(job)));
