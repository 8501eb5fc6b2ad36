// The installable package, as a user gets it: `npm run pack:client` packs it, `npm install
// <tarball>` puts it into an empty project, and from there, against a real stack of its own
// (wrangler dev edge + runner): its types compile in a strict consumer, a Node script creates a
// session, types into it and waits for its exit, `npx ptybroker` runs, and a page on another
// origin, bundled by esbuild from `ptybroker/client`, reads a session with a viewer token through
// CORS in Chromium. Every wait has a deadline; none is a fixed sleep.
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { isAbsolute, join } from "node:path";
import { promisify } from "node:util";
import { build } from "esbuild";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Edge, type ManagedProcess, ROOT, secret, startEdge, startRunner, waitForRunners } from "../scripts/stack.js";
import { launchChromium } from "./browser.js";
import { Api } from "./harness.js";

const run = promisify(execFile);
/** The repository's package.json: the packed package takes its version and `ws`'s from it. */
const repo = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string; dependencies: Record<string, string> };
const TARBALL = `ptybroker-${repo.version}.tgz`;
const WS = repo.dependencies.ws;
const KEY = "package-key";
const BASH = { command: "/bin/bash", args: ["--norc", "--noprofile"] };
/** What the server side is made of: none of it may be installed with the package. */
const SERVER_PACKAGES = ["wrangler", "workerd", "node-pty", "ioredis", "hono", "miniflare", "zod"];

/** The environment of the commands run in the project: none of this repo's npm settings. */
const projectEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));

let project: string;
let tarball: string;
let packOutput: string;
let edge: Edge;
let runner: ManagedProcess;
let api: Api;
let browser: Browser | undefined;
/** The origin of the page CORS_ORIGINS names. */
let allowedOrigin: string;
const pages: Server[] = [];
const sessions: string[] = [];

function lastLine(text: string): string {
  return text.trimEnd().split("\n").pop() ?? "";
}

/** The page the tiny web servers serve: filled in by the browser case. */
const site = { html: "", script: "" };

/** A tiny web server for the bundled page (`/` and `/app.js`), on a port of its own; its origin. */
async function servePage(): Promise<string> {
  const server = createServer((req, res) => {
    if (req.url === "/") res.writeHead(200, { "content-type": "text/html" }).end(site.html);
    else if (req.url === "/app.js") res.writeHead(200, { "content-type": "text/javascript" }).end(site.script);
    else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  pages.push(server);
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("the page server has no port");
  return `http://127.0.0.1:${address.port}`;
}

// The page's script, bundled from the project: what a web app embedding the SDK would ship.
const BROWSER_ENTRY = `
import { PtyBroker, PtyBrokerError } from "ptybroker/client";

globalThis.readSession = async ({ url, token, id, marker }) => {
  const broker = new PtyBroker({ url, token });
  const decoder = new TextDecoder();
  try {
    const session = await broker.get(id);
    let live = "";
    let seen;
    const saw = new Promise((resolve) => (seen = resolve));
    const pty = await broker.connect(id, {
      from: 0,
      onData: (bytes) => {
        live += decoder.decode(bytes, { stream: true });
        if (live.includes(marker)) seen();
      },
    });
    await saw;
    const output = await broker.output(id);
    let refused = null;
    try {
      await pty.sendInput("typed by a viewer\\n");
    } catch (error) {
      refused = error instanceof PtyBrokerError ? error.code : String(error);
    }
    pty.close();
    return {
      status: session.status,
      command: session.command,
      live,
      output: { from: output.from, to: output.to, text: new TextDecoder().decode(output.bytes) },
      readOnly: pty.readOnly,
      refused,
      globalWebSocket: typeof WebSocket === "function",
    };
  } catch (error) {
    return { error: error instanceof PtyBrokerError ? error.code : String(error) };
  }
};
`;

beforeAll(async () => {
  project = mkdtempSync(join(tmpdir(), "ptybroker-package-"));
  // The page's origin must be known before the edge starts: it goes into CORS_ORIGINS.
  allowedOrigin = await servePage();
  const runnerToken = secret();
  const [packed] = await Promise.all([
    run("npm", ["run", "--silent", "pack:client"], { cwd: ROOT, encoding: "utf8" }),
    (async () => {
      edge = await startEdge({
        apiKeys: `pkg:${KEY}`,
        runnerToken,
        vars: { CORS_ORIGINS: allowedOrigin },
      });
      runner = startRunner({ brokerUrl: edge.url, runnerToken, runnerId: "package-runner" });
      await waitForRunners(edge.url, runnerToken, 1);
    })(),
  ]);
  packOutput = packed.stdout;
  tarball = lastLine(packed.stdout);
  api = new Api(edge.url, KEY);

  writeFileSync(join(project, "package.json"), `${JSON.stringify({ name: "consumer", private: true, type: "module" }, null, 2)}\n`);
  await run("npm", ["install", tarball, "--no-audit", "--no-fund", "--prefer-offline", "--prefix", project], {
    cwd: project,
    env: projectEnv,
    encoding: "utf8",
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  for (const server of pages) server.close();
  if (api) await Promise.all(sessions.map((id) => api.destroy(id)));
  await runner?.stop();
  await edge?.stop();
  if (project) rmSync(project, { recursive: true, force: true });
});

describe("the packed SDK and CLI (npm run pack:client)", () => {
  it("packs into dist/pack, prints the tarball's absolute path last, and holds JavaScript and types only", () => {
    expect(isAbsolute(tarball)).toBe(true);
    expect(tarball).toBe(join(ROOT, "dist/pack", TARBALL));
    expect(existsSync(tarball)).toBe(true);
    const summary = packOutput.trimEnd().split("\n").at(-2) ?? "";
    expect(summary.replace(/[\d.]+ kB/g, "N kB").replace(/\d+ ms$/, "N ms")).toBe(
      `pack:client: ${TARBALL}: N kB packed, N kB unpacked, 26 files; depends on ws ${WS}; ` +
        "the SDK bundles eventsource-parser, the CLI eventsource-parser, hono; N ms",
    );
    const installed = join(project, "node_modules/ptybroker");
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)).map((f) => `${e.name}/${f}`) : [e.name]));
    expect(files(installed).sort()).toEqual([
      "README.md",
      "dist/cli.js",
      "dist/client.js",
      "dist/licenses/eventsource-parser.LICENSE",
      "dist/licenses/hono.LICENSE",
      "dist/types/client/agent.d.ts",
      "dist/types/client/broker-options.d.ts",
      "dist/types/client/broker.d.ts",
      "dist/types/client/emitter.d.ts",
      "dist/types/client/errors.d.ts",
      "dist/types/client/events.d.ts",
      "dist/types/client/http.d.ts",
      "dist/types/client/index.d.ts",
      "dist/types/client/keys.d.ts",
      "dist/types/client/pty-calls.d.ts",
      "dist/types/client/pty-types.d.ts",
      "dist/types/client/pty.d.ts",
      "dist/types/client/webhooks.d.ts",
      "dist/types/shared/agent.d.ts",
      "dist/types/shared/errors.d.ts",
      "dist/types/shared/keys.d.ts",
      "dist/types/shared/protocol.d.ts",
      "dist/types/shared/session.d.ts",
      "dist/types/shared/webhook-signature.d.ts",
      "dist/types/shared/webhooks.d.ts",
      "package.json",
    ]);
    const manifest = JSON.parse(readFileSync(join(installed, "package.json"), "utf8")) as Record<string, unknown>;
    expect(manifest.dependencies).toEqual({ ws: WS });
    expect(manifest.version).toBe(repo.version);
    expect(manifest.bin).toEqual({ ptybroker: "dist/cli.js" });
    // The SDK's JavaScript imports nothing but `ws` (and that only where there is no WebSocket).
    const sdk = readFileSync(join(installed, "dist/client.js"), "utf8");
    expect([...sdk.matchAll(/\bimport\s*\(\s*"([^"]+)"\s*\)|\bfrom\s+"([^"]+)"/g)].map((m) => m[1] ?? m[2])).toEqual(["ws"]);
  });

  it("installs into an empty project with ws alone: nothing of the server", () => {
    const modules = readdirSync(join(project, "node_modules")).filter((name) => !name.startsWith("."));
    expect(modules.sort()).toEqual(["ptybroker", "ws"]);
    for (const name of SERVER_PACKAGES) expect(existsSync(join(project, "node_modules", name)), name).toBe(false);
  });

  it("type-checks a consumer with strict, exactOptionalPropertyTypes and skipLibCheck: false (Node and bundler resolution)", async () => {
    // The way a Node project resolves `ptybroker/client` (NodeNext) and the way a web app's does (Bundler).
    const resolutions = { "tsconfig.node.json": "NodeNext", "tsconfig.bundler.json": "Bundler" } as const;
    for (const [file, resolution] of Object.entries(resolutions)) {
      writeFileSync(
        join(project, file),
        JSON.stringify({
          compilerOptions: {
            target: "ES2022",
            module: resolution === "NodeNext" ? "NodeNext" : "ESNext",
            moduleResolution: resolution,
            lib: ["ES2022", "DOM"],
            types: [],
            strict: true,
            exactOptionalPropertyTypes: true,
            skipLibCheck: false,
            noEmit: true,
          },
          files: ["consumer.ts"],
        }),
      );
    }
    writeFileSync(
      join(project, "consumer.ts"),
      `import { type BrokerEvent, type ExitInfo, type ListPageOptions, type Pty, PtyBroker, PtyBrokerError, type Session } from "ptybroker/client";
import { PtyBroker as RootBroker, type Session as RootSession } from "ptybroker";

// The package's root is the same SDK: its types are the subpath's.
export const same: typeof PtyBroker = RootBroker;
export const one: (s: Session) => RootSession = (s) => s;

declare const env: Record<string, string | undefined>;
const broker = new PtyBroker({ url: "http://127.0.0.1:8787", apiKey: env.KEY, token: undefined });
const cursor: string | undefined = env.CURSOR;
const options: ListPageOptions = { status: "running", cursor };

export async function use(): Promise<ExitInfo> {
  const pty: Pty = await broker.create({ cols: 80, rows: 24, label: env.LABEL, onData: (bytes: Uint8Array, offset: number) => void [bytes, offset] });
  const sessions: Session[] = (await broker.listPage(options)).sessions;
  pty.on("exit", (info: ExitInfo) => void [info.reason, sessions]);
  for await (const event of broker.events({ after: undefined })) {
    const e: BrokerEvent = event;
    if (e.type !== "gap") void e.session.status;
  }
  // @ts-expect-error: not a signal the API knows
  await pty.signal("SIGFOO");
  try {
    await pty.sendInput("exit 3\\n");
  } catch (error) {
    if (error instanceof PtyBrokerError && error.code === "FORBIDDEN") throw error;
  }
  return pty.wait();
}
`,
    );
    const check = (config: string) =>
      run(join(ROOT, "node_modules/.bin/tsc"), ["-p", join(project, config)], { cwd: project, encoding: "utf8" }).then(
        ({ stdout }) => ({ config, stdout, code: 0 }),
        (error: { stdout: string; code: number }) => ({ config, stdout: error.stdout, code: error.code }),
      );
    const results = await Promise.all(Object.keys(resolutions).map(check));
    expect(results).toEqual(Object.keys(resolutions).map((config) => ({ config, stdout: "", code: 0 })));
  });

  it("runs a Node script from the project: create, sendInput, wait, the exit code", async () => {
    writeFileSync(
      join(project, "run.mjs"),
      `import { PtyBroker } from "ptybroker/client";

const broker = new PtyBroker({ url: process.env.PTYBROKER_URL, apiKey: process.env.PTYBROKER_API_KEY });
const decoder = new TextDecoder();
let text = "";
const pty = await broker.create({
  command: "/bin/bash",
  args: ["--norc", "--noprofile"],
  label: "package-test",
  onData: (bytes) => (text += decoder.decode(bytes, { stream: true })),
});
await pty.sendInput("echo sum=$((40+2)); exit 7\\n");
const exit = await pty.wait();
pty.close();
console.log(JSON.stringify({ id: pty.id, exit, text }));
`,
    );
    const { stdout } = await run(process.execPath, ["run.mjs"], {
      cwd: project,
      env: { ...projectEnv, PTYBROKER_URL: edge.url, PTYBROKER_API_KEY: KEY },
      encoding: "utf8",
      timeout: 30_000,
    });
    const result = JSON.parse(lastLine(stdout)) as { id: string; exit: unknown; text: string };
    sessions.push(result.id);
    const session = await api.get(result.id);
    expect(result.exit).toEqual({ status: "exited", exitCode: 7, signal: null, reason: "exit", offset: session.offset });
    // The output as a line of its own (bash's bracketed paste ends the echoed command with \r).
    expect(result.text).toMatch(/[\r\n]sum=42\r\n/);
    expect(session).toMatchObject({ status: "exited", exitCode: 7, reason: "exit", label: "package-test" });
  });

  it("imports the SDK from the package's root, as ESM and with require: the same module as ptybroker/client", async () => {
    const session = await api.create({ ...BASH, label: "root-import" });
    sessions.push(session.id);
    // Each script reads the session through the root's PtyBroker and compares the root's exports with the subpath's.
    const read = `const broker = new root.PtyBroker({ url: process.env.PTYBROKER_URL, apiKey: process.env.PTYBROKER_API_KEY });
const session = await broker.get(process.env.SESSION_ID);
const sub = await import("ptybroker/client");
const names = Object.keys(root).filter((name) => name !== "default" && name !== "module.exports").sort();
console.log(JSON.stringify({ label: session.label, names, same: names.every((name) => root[name] === sub[name]), subNames: Object.keys(sub).sort() }));
`;
    writeFileSync(join(project, "root.mjs"), `import * as root from "ptybroker";\n${read}`);
    writeFileSync(join(project, "root.cjs"), `const root = require("ptybroker");\n(async () => {\n${read}})();\n`);
    const env = { ...projectEnv, PTYBROKER_URL: edge.url, PTYBROKER_API_KEY: KEY, SESSION_ID: session.id };
    try {
      for (const script of ["root.mjs", "root.cjs"]) {
        const { stdout } = await run(process.execPath, [script], { cwd: project, env, encoding: "utf8", timeout: 30_000 });
        const result = JSON.parse(lastLine(stdout)) as { label: string; names: string[]; same: boolean; subNames: string[] };
        expect({ script, ...result }).toEqual({ script, label: "root-import", names: result.subNames, same: true, subNames: result.subNames });
        expect(result.names).toContain("PtyBroker");
        expect(result.names).toContain("PtyBrokerError");
      }
    } finally {
      await api.destroy(session.id); // the `ls` case below counts the running sessions
    }
  });

  it("npx ptybroker works from the project (and a folder inside it): help and ls", async () => {
    const env = { ...projectEnv, PTYBROKER_URL: edge.url, PTYBROKER_API_KEY: KEY };
    const help = await run("npx", ["--no", "--", "ptybroker", "--help"], { cwd: project, env, encoding: "utf8" });
    expect(help.stdout.split("\n")[0]).toBe("ptybroker: persistent remote terminals");

    const session = await api.create({ ...BASH, label: "listed" });
    sessions.push(session.id);
    const inside = join(project, "src/deeper");
    mkdirSync(inside, { recursive: true });
    const ls = await run("npx", ["--no", "--", "ptybroker", "ls", "--status", "running"], { cwd: inside, env, encoding: "utf8" });
    const lines = ls.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^ID +STATUS +REASON +COMMAND +CREATED +CLIENTS +LABEL$/);
    expect(lines.slice(1)).toHaveLength(1);
    expect(lines[1]).toMatch(new RegExp(`^${session.id} +running +/bin/bash --norc --noprofile +\\S+ \\S+ +0 +listed$`));
  });

  it("a page on another origin, bundled from ptybroker/client, reads a session with a viewer token through CORS", async () => {
    const marker = "from-the-package-42";
    const session = await api.create({ command: "/bin/sh", args: ["-c", "echo from-the-package-$((40+2)); exec sleep 300"] });
    sessions.push(session.id);
    const minted = await api.request<{ token: string }>("POST", `/v1/sessions/${session.id}/tokens`, { role: "viewer", ttlSec: 300 });
    expect(minted.status).toBe(201);

    writeFileSync(join(project, "browser.js"), BROWSER_ENTRY);
    const bundle = await build({
      entryPoints: [join(project, "browser.js")],
      absWorkingDir: project,
      bundle: true,
      format: "esm",
      platform: "browser",
      target: "es2022",
      write: false,
      logLevel: "silent",
    });
    site.script = bundle.outputFiles[0].text;
    site.html = `<!doctype html><meta charset="utf-8"><title>ptybroker package</title><script type="module" src="/app.js"></script>`;
    // The same page from an origin CORS_ORIGINS does not name.
    const otherOrigin = await servePage();

    const chromiumBrowser = (browser ??= await launchChromium());
    const read = async (origin: string) => {
      const context = await chromiumBrowser.newContext();
      try {
        const page = await context.newPage();
        const errors: string[] = [];
        page.on("pageerror", (error) => errors.push(error.message));
        await page.goto(`${origin}/`);
        await page.waitForFunction("typeof globalThis.readSession === 'function'", undefined, { timeout: 10_000 });
        const result = await page.evaluate(
          `globalThis.readSession(${JSON.stringify({ url: edge.url, token: minted.body.token, id: session.id, marker })})`,
        );
        expect(errors).toEqual([]);
        return result as Record<string, unknown>;
      } finally {
        await context.close();
      }
    };

    const fromAllowed = await read(allowedOrigin);
    const text = `${marker}\r\n`;
    expect(fromAllowed).toEqual({
      status: "running",
      command: "/bin/sh",
      live: text,
      output: { from: 0, to: text.length, text },
      readOnly: true,
      refused: "FORBIDDEN",
      globalWebSocket: true,
    });

    // The same page from an origin CORS_ORIGINS does not name: the browser keeps the answer from it.
    expect(await read(otherOrigin)).toEqual({ error: "NETWORK" });
  });
});
