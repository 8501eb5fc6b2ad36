// What a suite must not leave behind, torn down once after it. A `SuiteCleanup` registers its own
// afterAll where it is made (at a file's top level: after the file; in a describe block: after
// that block), and a suite adds to it what it starts or creates as it goes.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";
import type { Edge, ManagedProcess } from "../scripts/stack.js";
import type { EventStreamClient } from "./event-stream.js";
import { alive, commandOf, liveSessionProcesses } from "./processes.js";
import type { Api } from "./rest-client.js";
import type { TcpProxy } from "./tcp-proxy.js";
import type { TermClient } from "./term-client.js";

/** What stops and resolves once stopped: a Redis server, a Redis Cluster. */
export interface Stoppable {
  stop(): Promise<void>;
}

export interface SuiteCleanupOptions {
  /** How clients end: `terminate` (the socket dropped at once, the default) or `close` (a 1000 close, awaited). */
  clients?: "terminate" | "close";
}

type Step = () => unknown;

/**
 * Everything a suite started or created, ended by one afterAll in this order: `first` callbacks
 * (a browser, a tmux server), clients, event streams, sessions (DELETE with purge), TCP proxies,
 * runners, edges, Redis servers, what is left of orphaned terminal sessions (SIGKILL), stray
 * processes (SIGKILL when the pid still runs the command it was registered with), folders, `last`
 * callbacks. Runners stop before the edges they report to, and edges before Redis. Every step
 * runs even when an earlier one failed; the first failure is thrown at the end.
 *
 * The sets are the suite's to read and to edit (a runner it SIGKILLed itself, an edge it stopped
 * to restart).
 */
export class SuiteCleanup {
  readonly clients = new Set<TermClient>();
  readonly streams = new Set<EventStreamClient>();
  readonly sessions: { api: Api; id: string }[] = [];
  readonly proxies = new Set<TcpProxy>();
  readonly runners = new Set<ManagedProcess>();
  readonly edges = new Set<Edge>();
  readonly redises = new Set<Stoppable>();
  /** Leaders of terminal sessions whose processes must not outlive the suite (their runner was SIGKILLed). */
  readonly orphanSessions: number[] = [];
  /** Processes a session started that may have escaped it: SIGKILLed if `pid` still runs `command`. */
  readonly strays: { pid: number; command: string }[] = [];
  readonly folders: string[] = [];
  private readonly firsts: Step[] = [];
  private readonly lasts: Step[] = [];

  constructor(private readonly options: SuiteCleanupOptions = {}) {
    afterAll(() => this.run());
  }

  client<T extends TermClient>(client: T): T {
    return added(this.clients, client);
  }

  stream<T extends EventStreamClient>(stream: T): T {
    return added(this.streams, stream);
  }

  /** A session to delete with purge (it may be gone already). */
  session(api: Api, id: string): void {
    this.sessions.push({ api, id });
  }

  proxy<T extends TcpProxy>(proxy: T): T {
    return added(this.proxies, proxy);
  }

  runner<T extends ManagedProcess>(runner: T): T {
    return added(this.runners, runner);
  }

  edge<T extends Edge>(edge: T): T {
    return added(this.edges, edge);
  }

  redis<T extends Stoppable>(redis: T): T {
    return added(this.redises, redis);
  }

  orphanSession(sid: number): void {
    this.orphanSessions.push(sid);
  }

  strayProcess(pid: number, command: string): void {
    this.strays.push({ pid, command });
  }

  folder(path: string): string {
    this.folders.push(path);
    return path;
  }

  /** A fresh folder under the system's temporary folder, named `prefix` and a random tail; removed at the end. */
  tempFolder(prefix: string): string {
    return this.folder(mkdtempSync(join(tmpdir(), prefix)));
  }

  /** Runs `step` before everything else. */
  first(step: Step): void {
    this.firsts.push(step);
  }

  /** Runs `step` after everything else. */
  last(step: Step): void {
    this.lasts.push(step);
  }

  private async run(): Promise<void> {
    const steps: Step[] = [
      () => Promise.all(this.firsts.map((step) => step())),
      () =>
        this.options.clients === "close"
          ? Promise.all([...this.clients].map((c) => c.close()))
          : [...this.clients].forEach((c) => c.socket.terminate()),
      () => [...this.streams].forEach((s) => s.close()),
      () => Promise.all(this.sessions.map(({ api, id }) => api.destroy(id))),
      () => Promise.all([...this.proxies].map((p) => p.close())),
      () => Promise.all([...this.runners].map((r) => r.stop())),
      () => Promise.all([...this.edges].map((e) => e.stop())),
      () => Promise.all([...this.redises].map((r) => r.stop())),
      () => {
        for (const sid of this.orphanSessions) {
          for (const pid of liveSessionProcesses(sid)) kill(pid);
        }
      },
      () => {
        for (const { pid, command } of this.strays) {
          if (alive(pid) && commandOf(pid) === command) kill(pid);
        }
      },
      () => {
        for (const folder of this.folders) {
          unmountUnder(folder); // tenants' workspace filesystems a runner left mounted
          rmSync(folder, { recursive: true, force: true });
        }
      },
      () => Promise.all(this.lasts.map((step) => step())),
    ];
    const failures: unknown[] = [];
    for (const step of steps) {
      try {
        await step();
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length > 0) throw failures[0];
  }
}

function added<T, U extends T>(set: Set<T>, item: U): U {
  set.add(item);
  return item;
}

/** SIGKILL to one pid (never a group); gone meanwhile is fine. */
function kill(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // gone meanwhile
  }
}

/**
 * Unmounts every filesystem mounted under `folder`, deepest first (a runner leaves a tenant's
 * workspace filesystem mounted while another runner may use it: runner/isolation/tenant-disk.ts).
 */
export function unmountUnder(folder: string): void {
  let info = "";
  try {
    info = readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return;
  }
  const points = info
    .split("\n")
    .map((row) => row.split(" ")[4]?.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8))))
    .filter((point): point is string => point !== undefined && point.startsWith(`${folder}/`))
    .sort((a, b) => b.length - a.length);
  for (const point of points) spawnSync("umount", [point], { stdio: "ignore" });
}
