// `npm run build`: bundles what is shipped as JavaScript, with esbuild.
//   web/dist/     the browser page the Worker serves as static assets (wrangler.toml [assets])
//   dist/client/  the SDK (`ptybroker/client`) and the CLI (`bin/ptybroker.js`)
// Each is built into a fresh folder under dist/.staging (git-ignored, same file system) and then
// moved in by renames, so a running `npm start` (or a test using the CLI) never sees a file half
// written or missing: web/dist and dist/client always hold a complete build.
//
// web/dist keeps its folder and takes the new files one rename each, rather than being swapped
// as a folder: `wrangler dev` serves it through workerd, which holds the folder open, and
// wrangler's watcher watches it by path. A folder renamed away is still what workerd reads from
// (until it is removed: 500s), and the watcher loses it, so no reload ever picks up the new one.
// Renamed files land in the folder both hold; the watcher sees them and reloads the assets.
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from "node:fs";
import { join, relative } from "node:path";
import { build } from "esbuild";
import { ROOT } from "./stack.js";

const started = performance.now();
const webTarget = join(ROOT, "web/dist");
const clientTarget = join(ROOT, "dist/client");
const staging = join(ROOT, "dist/.staging");
mkdirSync(staging, { recursive: true });
const webOut = mkdtempSync(join(staging, "web-dist-"));
const clientOut = mkdtempSync(join(staging, "client-"));
// Whatever is left of them once this build is over (all of it if a step failed) goes.
process.on("exit", () => {
  rmSync(webOut, { recursive: true, force: true });
  rmSync(clientOut, { recursive: true, force: true });
});

/** Every file under `dir`, relative to it. */
function files(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)));
}

/**
 * Moves the files of `fresh` into the folder `target`, each by one rename (atomic: a reader gets
 * the old file or the new one, whole), the page's entry (index.html) last; then removes the files
 * the new build no longer has. At every moment each file a page needs is there and complete.
 */
function moveFilesIn(fresh: string, target: string): void {
  mkdirSync(target, { recursive: true });
  const fresher = files(fresh).sort((a, b) => Number(a === "index.html") - Number(b === "index.html"));
  for (const file of fresher) {
    mkdirSync(join(target, file, ".."), { recursive: true });
    renameSync(join(fresh, file), join(target, file));
  }
  const kept = new Set(fresher);
  for (const file of files(target)) if (!kept.has(file)) rmSync(join(target, file), { force: true });
}

/**
 * Puts the folder `fresh` at `target`: the old one renamed away, the new one renamed in, the old
 * one removed. Two renames, since rename(2) cannot replace a non-empty folder: `target` is missing
 * for microseconds between them. Another build swapping at the same moment can put its folder
 * there first: then this one moves that away too and tries again.
 */
function swapIn(fresh: string, target: string): void {
  for (let attempt = 0; ; attempt++) {
    const old = `${fresh}.old-${attempt}`;
    let moved = true;
    try {
      renameSync(target, old);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      moved = false; // none there: the first build, or another build's swap is under way
    }
    try {
      renameSync(fresh, target);
      return;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if ((code !== "ENOTEMPTY" && code !== "EEXIST") || attempt >= 20) throw error;
    } finally {
      if (moved) rmSync(old, { recursive: true, force: true });
    }
  }
}

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
    entryPoints: { cli: join(ROOT, "client/cli/main.ts") },
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
moveFilesIn(webOut, webTarget);
swapIn(clientOut, clientTarget);
console.log(`build: web/dist and dist/client in ${Math.round(performance.now() - started)} ms`);
