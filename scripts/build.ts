// `npm run build`: bundles what is shipped as JavaScript, with esbuild.
//   web/dist/     the browser page the Worker serves as static assets (wrangler.toml [assets])
//   dist/client/  the SDK (`ptybroker/client`) and the CLI (`bin/ptybroker.js`)
import { copyFileSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";
import { ROOT } from "./stack.js";

const started = performance.now();
const webOut = join(ROOT, "web/dist");
const clientOut = join(ROOT, "dist/client");
rmSync(webOut, { recursive: true, force: true });
rmSync(clientOut, { recursive: true, force: true });
mkdirSync(webOut, { recursive: true });

await Promise.all([
  // The page: one script and one stylesheet (xterm.css is imported by the page's entry).
  build({
    entryPoints: { app: join(ROOT, "web/main.ts") },
    outdir: webOut,
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    minify: true,
    sourcemap: true,
    // Browsers have a global WebSocket; the SDK only loads `ws` where there is none.
    external: ["ws"],
    logLevel: "warning",
  }),
  // The SDK, for Node 20 and for bundlers. Its dependencies (zod, and `ws`, which it loads only
  // where there is no global WebSocket) stay imports, resolved from the package's own.
  build({
    entryPoints: { index: join(ROOT, "client/index.ts") },
    outdir: clientOut,
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    packages: "external",
    sourcemap: true,
    logLevel: "warning",
  }),
  build({
    entryPoints: { cli: join(ROOT, "client/cli.ts") },
    outdir: clientOut,
    bundle: true,
    format: "esm",
    platform: "node",
    target: "node20",
    packages: "external",
    sourcemap: true,
    logLevel: "warning",
  }),
]);
for (const file of ["index.html", "style.css"]) copyFileSync(join(ROOT, "web", file), join(webOut, file));
console.log(`build: web/dist and dist/client in ${Math.round(performance.now() - started)} ms`);
