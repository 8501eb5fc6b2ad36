// The peer row of the benchmark table: WeTTY 3.2 on this machine, measured the same way as our
// stack. Keystroke echo round trip (one printable byte into `stty raw -echo; cat`, wait for it to
// come back) and throughput (base64 of /dev/zero until an end marker), each run on a fresh
// socket.io connection, so a fresh bash.
//
// WeTTY is installed on first use into bench/.peers/wetty (ignored by git) with the socket.io
// client it speaks to, and run as `wetty --command bash` on 127.0.0.1. As root with its ssh host
// left at localhost, WeTTY spawns the command directly (`/usr/bin/env -S bash` in a node-pty)
// instead of `login` or ssh (build/server/command.js, build/server/spawn.js).
//
// Its protocol (3.2.0: build/server/spawn.js and the client in build/client/wetty.js.map):
// socket.io at `<base>/socket.io`; on connection the server spawns the pty and emits `login`;
// output arrives as `data` (string), input goes as `input` (string), size as `resize`
// {cols, rows}; `logout` when the process ends. Flow control: the server counts the output it
// sent and pauses the pty above 2 MiB unacknowledged until the client emits `commit` (the web
// client commits 262144 per 262144 characters received), so a client that never commits stalls.
// Output is batched on the server: each chunk waits for a 2 ms timer (or until 512 KiB are
// pending) before it is emitted (`tinybuffer(socket, 2, 524288)` in build/server/spawn.js,
// build/server/flowcontrol.js) — that is part of what the echo round trip measures.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, relative } from "node:path";
import { performance } from "node:perf_hooks";
import { ROOT, freePort, manage, type ManagedProcess } from "../scripts/stack.js";
import { percentile } from "./stats.js";

export interface PeerResult {
  version: string; // WeTTY's version as installed, e.g. "3.2.0"
  echoP50Ms: number[]; // one value per run: median keystroke round trip in that run
  echoP99Ms: number[]; // one value per run: 99th percentile
  throughputMBps: number[]; // one value per run: MB (1e6 bytes) per second received
}

const WETTY_VERSION = "3.2.0";
const PEER_DIR = join(ROOT, "bench/.peers/wetty");
const MARKER = "BENCH-42-END";
/** What the web client acknowledges at a time (src/client/wetty/flowcontrol.ts: ackBytes). */
const ACK_CHARS = 262_144;

/** The part of socket.io-client's Socket that we use (the library is not a project dependency). */
interface Socket {
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  emit(event: string, ...args: unknown[]): unknown;
  disconnect(): unknown;
}
type Connect = (url: string, options: Record<string, unknown>) => Socket;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const pkgVersion = (name: string): string | undefined => {
  try {
    return (JSON.parse(readFileSync(join(PEER_DIR, "node_modules", name, "package.json"), "utf8")) as { version: string })
      .version;
  } catch {
    return undefined;
  }
};
const major = (version: string | undefined) => Number(version?.split(".")[0]);

function installed(): boolean {
  return (
    pkgVersion("wetty") === WETTY_VERSION &&
    major(pkgVersion("socket.io-client")) === major(pkgVersion("socket.io")) &&
    // node-pty's native addon, built by its install script (node-gyp)
    existsSync(join(PEER_DIR, "node_modules/node-pty/build/Release/pty.node"))
  );
}

/** `npm install` of WeTTY and socket.io-client into bench/.peers/wetty, unless already there. */
async function ensureInstalled(progress: (message: string) => void): Promise<void> {
  if (installed()) {
    progress(`wetty: ${WETTY_VERSION} already installed in ${relative(ROOT, PEER_DIR)}`);
    return;
  }
  mkdirSync(PEER_DIR, { recursive: true });
  // npm 11 asks each package's install scripts to be allowed: node-pty must build its addon;
  // @parcel/watcher (under sass, which only WeTTY's own build uses) needs no script here.
  const manifestPath = join(PEER_DIR, "package.json");
  const manifest = existsSync(manifestPath)
    ? (JSON.parse(readFileSync(manifestPath, "utf8")) as Record<string, unknown>)
    : { name: "ptybroker-bench-peer-wetty", private: true };
  manifest.allowScripts = { "node-pty": true, "@parcel/watcher": false };
  writeFileSync(manifestPath, JSON.stringify(manifest, null, 2) + "\n");

  // socket.io-client's major must match the socket.io that WeTTY 3.2 serves (^4.8).
  const args = ["install", "--prefix", PEER_DIR, "--no-audit", "--no-fund", "--save-exact"];
  args.push(`wetty@${WETTY_VERSION}`, "socket.io-client@4");
  progress(`wetty: installing ${WETTY_VERSION} into ${relative(ROOT, PEER_DIR)} (npm ${args.join(" ")}) …`);
  const started = Date.now();
  const ticker = setInterval(() => progress(`wetty: still installing (${Math.round((Date.now() - started) / 1000)} s) …`), 15_000);
  let log = "";
  try {
    const code = await new Promise<number | null>((resolve, reject) => {
      const npm = spawn("npm", args, { cwd: PEER_DIR, stdio: ["ignore", "pipe", "pipe"] });
      npm.stdout.on("data", (chunk: Buffer) => (log += chunk.toString()));
      npm.stderr.on("data", (chunk: Buffer) => (log += chunk.toString()));
      npm.on("error", reject);
      npm.on("close", resolve);
    });
    if (code !== 0) throw new Error(`npm install of wetty@${WETTY_VERSION} failed (exit ${code}):\n${log.slice(-4000)}`);
  } finally {
    clearInterval(ticker);
  }
  if (!installed()) {
    throw new Error(`wetty@${WETTY_VERSION} installed incompletely (wetty, socket.io-client or node-pty's addon missing):\n${log.slice(-4000)}`);
  }
  progress(`wetty: installed ${WETTY_VERSION} in ${Math.round((Date.now() - started) / 1000)} s`);
}

async function startWetty(port: number): Promise<ManagedProcess> {
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_ENV: "production" };
  // WeTTY reads its defaults from these; the flags below set what matters explicitly.
  for (const name of ["COMMAND", "SSHHOST", "FORCESSH", "BASE", "PORT"]) delete env[name];
  const wetty = manage(
    process.execPath,
    [
      join(PEER_DIR, "node_modules/wetty/build/main.js"),
      "--host", "127.0.0.1",
      "--port", String(port),
      "--command", "bash",
      "--ssh-host", "localhost", // with root, "localhost" means: run the command, not ssh
      "--log-level", "warn",
    ],
    env,
  );
  let exitCode: number | null | undefined;
  void wetty.exited.then((code) => (exitCode = code));
  const deadline = Date.now() + 30_000;
  try {
    for (;;) {
      if (exitCode !== undefined) throw new Error(`wetty exited (${exitCode}) before it was ready:\n${wetty.output()}`);
      if (Date.now() > deadline) throw new Error(`wetty not listening after 30 s:\n${wetty.output()}`);
      try {
        if ((await fetch(`http://127.0.0.1:${port}/`)).ok) return wetty;
      } catch {
        // not listening yet
      }
      await sleep(100);
    }
  } catch (error) {
    await wetty.stop();
    throw error;
  }
}

/** One WeTTY terminal: a socket.io connection, and so a bash of its own. */
class WettyTerminal {
  private listeners = new Set<(data: string, at: number) => void>();
  private lastDataAt = performance.now();
  private unacked = 0;
  private closed = false;
  private ended: string | undefined;

  private constructor(private readonly socket: Socket) {
    socket.on("data", (...args: unknown[]) => {
      const at = performance.now();
      const data = String(args[0]);
      this.lastDataAt = at;
      // Acknowledge like the web client does, but right away (no xterm.js parsing to wait for).
      this.unacked += data.length;
      while (this.unacked >= ACK_CHARS) {
        this.unacked -= ACK_CHARS;
        socket.emit("commit", ACK_CHARS);
      }
      for (const listener of this.listeners) listener(data, at);
    });
    socket.on("logout", () => (this.ended = "the shell exited (logout)"));
    socket.on("disconnect", (...args: unknown[]) => (this.ended ??= `disconnected (${String(args[0])})`));
  }

  static open(connect: Connect, url: string): Promise<WettyTerminal> {
    return new Promise((resolve, reject) => {
      // Force the WebSocket transport (where the browser ends up after its upgrade from polling);
      // forceNew: a connection of its own, not multiplexed onto an earlier one.
      const socket = connect(url, {
        path: "/socket.io",
        transports: ["websocket"],
        forceNew: true,
        reconnection: false,
        timeout: 10_000,
      });
      const terminal = new WettyTerminal(socket);
      const timer = setTimeout(() => {
        socket.disconnect();
        reject(new Error("wetty: no login event within 10 s"));
      }, 10_000);
      socket.on("connect_error", (...args: unknown[]) => {
        clearTimeout(timer);
        socket.disconnect();
        reject(new Error(`wetty: could not connect: ${String(args[0])}`));
      });
      // `login`: the pty is spawned and its listeners (input, resize, commit) are in place.
      socket.on("login", () => {
        clearTimeout(timer);
        socket.emit("resize", { cols: 80, rows: 24 });
        resolve(terminal);
      });
    });
  }

  send(input: string): void {
    this.socket.emit("input", input);
  }

  onData(listener: (data: string, at: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Resolves once no output has come for `quietMs` (within `maxMs`, or it throws). */
  async quiet(quietMs: number, maxMs = 15_000): Promise<void> {
    const deadline = performance.now() + maxMs;
    this.lastDataAt = performance.now();
    for (;;) {
      this.check();
      const now = performance.now();
      if (now - this.lastDataAt >= quietMs) return;
      if (now > deadline) throw new Error(`wetty: output did not settle within ${maxMs} ms`);
      await sleep(Math.max(5, quietMs - (now - this.lastDataAt)));
    }
  }

  /** Resolves with the time at which output containing `text` arrived (searched across chunks). */
  waitFor(text: string, timeoutMs: number): Promise<number> {
    return new Promise((resolve, reject) => {
      let tail = "";
      const timer = setTimeout(() => {
        stop();
        clearInterval(poll);
        reject(new Error(`wetty: ${JSON.stringify(text)} did not arrive within ${timeoutMs} ms`));
      }, timeoutMs);
      const poll = setInterval(() => {
        if (this.ended === undefined) return;
        stop();
        clearTimeout(timer);
        clearInterval(poll);
        reject(new Error(`wetty: ${this.ended} while waiting for ${JSON.stringify(text)}`));
      }, 50);
      const stop = this.onData((data, at) => {
        const window = tail + data;
        if (window.includes(text)) {
          stop();
          clearTimeout(timer);
          clearInterval(poll);
          resolve(at);
        } else {
          tail = text.length > 1 ? window.slice(-(text.length - 1)) : "";
        }
      });
    });
  }

  private check(): void {
    if (this.ended !== undefined) throw new Error(`wetty: ${this.ended}`);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.listeners.clear();
    this.socket.disconnect(); // the server kills the pty on disconnect
  }
}

/** Keystroke round trips through `stty raw -echo; cat`: one byte out, wait until it is back. */
async function echoRun(connect: Connect, url: string, keystrokes: number): Promise<number[]> {
  const terminal = await WettyTerminal.open(connect, url);
  try {
    await terminal.quiet(300); // bash's prompt
    terminal.send("stty raw -echo; cat\r");
    await terminal.quiet(200);
    // Ready when a probe byte comes back through cat; then let any stray echo drain.
    for (let attempt = 1; ; attempt++) {
      const back = terminal.waitFor("#", 2_000);
      terminal.send("#");
      try {
        await back;
        break;
      } catch (error) {
        if (attempt >= 5) throw error;
      }
    }
    await terminal.quiet(100);

    const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
    const samples: number[] = [];
    for (let i = 0; i < keystrokes; i++) {
      const key = alphabet[i % alphabet.length];
      const back = terminal.waitFor(key, 5_000);
      const sent = performance.now();
      terminal.send(key);
      samples.push((await back) - sent);
    }
    return samples;
  } finally {
    terminal.close();
  }
}

/** Bytes received, and seconds, from sending the command until the end marker arrives. */
async function throughputRun(connect: Connect, url: string, bytes: number): Promise<{ received: number; seconds: number }> {
  const terminal = await WettyTerminal.open(connect, url);
  try {
    await terminal.quiet(300); // bash's prompt
    let received = 0;
    const stopCounting = terminal.onData((data) => (received += Buffer.byteLength(data)));
    const done = terminal.waitFor(MARKER, 60_000 + bytes / 100); // ≥ 0.1 MB/s, or it failed
    const sent = performance.now();
    terminal.send(`stty -echo; head -c ${Math.round((bytes * 3) / 4)} /dev/zero | base64 -w 200; echo BENCH-$((6*7))-END\r`);
    const end = await done;
    stopCounting();
    return { received, seconds: (end - sent) / 1000 };
  } finally {
    terminal.close();
  }
}

export async function measureWetty(options: {
  keystrokes: number; // e.g. 1000
  bytes: number; // e.g. 30_000_000 (printable output size)
  runs: number; // e.g. 5
  progress: (message: string) => void; // one line per step
}): Promise<PeerResult> {
  const { keystrokes, bytes, runs, progress } = options;
  if (process.getuid?.() !== 0) {
    // Not as root, WeTTY asks for a user name and goes through ssh instead of running bash.
    throw new Error("wetty: the peer benchmark must run as root (WeTTY runs --command directly only for root)");
  }
  await ensureInstalled(progress);
  const version = pkgVersion("wetty") ?? "unknown";
  const requireFromPeer = createRequire(join(PEER_DIR, "package.json"));
  const { io } = requireFromPeer("socket.io-client") as { io: Connect };

  const port = await freePort();
  progress(`wetty: starting ${version} on 127.0.0.1:${port} (--command bash)`);
  const wetty = await startWetty(port);
  const url = `http://127.0.0.1:${port}`;
  const result: PeerResult = { version, echoP50Ms: [], echoP99Ms: [], throughputMBps: [] };
  try {
    for (let run = 1; run <= runs; run++) {
      const samples = await echoRun(io, url, keystrokes);
      const p50 = percentile(samples, 50);
      const p99 = percentile(samples, 99);
      result.echoP50Ms.push(p50);
      result.echoP99Ms.push(p99);
      progress(`wetty: run ${run}/${runs} echo p50 ${p50.toFixed(2)} ms, p99 ${p99.toFixed(2)} ms (${samples.length} keystrokes)`);

      const { received, seconds } = await throughputRun(io, url, bytes);
      // base64 of 3/4·bytes is `bytes` characters plus a newline per 200 (sent as \r\n by the tty).
      if (Math.abs(received - bytes) > 0.02 * bytes) {
        throw new Error(`wetty: throughput run received ${received} bytes, expected about ${bytes}`);
      }
      const mbps = received / 1e6 / seconds;
      result.throughputMBps.push(mbps);
      progress(`wetty: run ${run}/${runs} throughput ${mbps.toFixed(1)} MB/s (${received} bytes in ${seconds.toFixed(2)} s)`);
    }
  } finally {
    await wetty.stop();
  }
  return result;
}
