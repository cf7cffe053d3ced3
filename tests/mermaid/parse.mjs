// Parse Mermaid files with Mermaid's own parser (mermaid.parse) under jsdom.
// Usage: node parse.mjs CACHE_DIR FILE...   (CACHE_DIR holds node_modules/)
// Prints one JSON line per file: {"file", "ok", "type"} or {"file", "ok": false, "error"}.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [cacheDir, ...files] = process.argv.slice(2);
const require = createRequire(join(resolve(cacheDir), "package.json"));
const { JSDOM } = require("jsdom");
const dom = new JSDOM("<!doctype html><html><body></body></html>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import(pathToFileURL(require.resolve("mermaid")).href);
mermaid.initialize({ startOnLoad: false });

let failures = 0;
for (const file of files) {
  try {
    const result = await mermaid.parse(readFileSync(file, "utf8"));
    console.log(JSON.stringify({ file, ok: true, type: result.diagramType }));
  } catch (err) {
    failures += 1;
    console.log(JSON.stringify({ file, ok: false, error: String(err?.message ?? err) }));
  }
}
process.exit(failures ? 1 : 0);
