// Copies the repository's one Functions library source (functions/ratelimit.lua)
// into dist/, where the package reads it (src/backend.ts): the npm package
// carries the same bytes the module's tests prove. RL_LIBRARY names another
// source (a release tree). A checkout without the library builds without it;
// the backend "functions" then says the file is missing.
import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const source = process.env.RL_LIBRARY || fileURLToPath(new URL("../../../functions/ratelimit.lua", import.meta.url));
const target = fileURLToPath(new URL("../dist/ratelimit.lua", import.meta.url));
if (existsSync(source)) {
  mkdirSync(fileURLToPath(new URL("../dist/", import.meta.url)), { recursive: true });
  copyFileSync(source, target);
} else {
  console.warn(`copy-library: ${source} not found; the package is built without the Functions library`);
}
