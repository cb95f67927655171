// A README example run as written: the package README's ```js block that
// holds `marker`, with only what the test must change (a Redis URL, a
// console.log into an export), imported as a module. One place for the
// tests that keep the README's examples honest.
"use strict";
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const { pathToFileURL } = require("node:url");

const README = path.join(__dirname, "..", "..", "README.md");

/**
 * Imports the README's ```js block holding `marker`, rewritten by `edit`
 * (which must change it: a README that no longer holds the text a test
 * replaces fails here, not later). The module is written into test/ as
 * readme-<name>.tmp.mjs, so that "redis-ratelimit" resolves to this package,
 * and removed once imported.
 */
async function importReadmeBlock(marker, name, edit) {
  const readme = fs.readFileSync(README, "utf8");
  const block = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]).find((b) => b.includes(marker));
  assert.ok(block, `the README has a js block with ${JSON.stringify(marker)}`);
  const code = edit(block);
  assert.notEqual(code, block);
  const file = path.join(__dirname, "..", `readme-${name}.tmp.mjs`);
  fs.writeFileSync(file, code);
  try {
    return await import(pathToFileURL(file).href);
  } finally {
    fs.rmSync(file);
  }
}

module.exports = { importReadmeBlock };
