// The agent layer of every hosted terminal, off the thread that reads PTYs and sends frames
// (docs/architecture.md, "The emulator off the hot path"): the screen's emulator parses every
// output byte, ~30 ms per MB, which on the main thread delayed every session's frames and
// keystrokes on this runner. Here each session's AgentHost (agent-host.ts) lives in one worker
// thread (agent-worker.ts) shared by the runner's sessions; `AgentThreadHost` is its stand-in on
// the main thread, with the same methods, each a message in order: output and resizes reach the
// screen in the order they were read, and a `screen` or `run` is answered after the output sent
// before it. What the worker's hosts say (messages to the edge, input to type, behind/caught up)
// comes back by session key.
import { Worker } from "node:worker_threads";
import { log } from "../../shared/log.js";
import type { EdgeLinkMessage } from "../../shared/protocol.js";
import type { AgentHostPort, AgentLayer, AgentOptions } from "./agent-host.js";

/** Main thread → worker, one session's step each. */
export type ToAgentWorker =
  | ({ op: "open"; key: string } & AgentOptions)
  | { op: "output"; key: string; offset: number; bytes: Uint8Array }
  | { op: "resize"; key: string; cols: number; rows: number }
  | { op: "call"; key: string; message: EdgeLinkMessage }
  | { op: "resumed"; key: string }
  | { op: "exited"; key: string; exitCode: number | null }
  | { op: "dispose"; key: string };

/** Worker → main thread, for one session. `failed`: its agent layer threw and is off from here on. */
export type FromAgentWorker =
  | { op: "send"; key: string; message: Parameters<AgentHostPort["send"]>[0] }
  | { op: "type"; key: string; bytes: Uint8Array }
  | { op: "behind"; key: string; behind: boolean }
  | { op: "failed"; key: string; error: string };

/** The sessions' worker: started with the first terminal, shared by all, stopped with the runner. */
class AgentWorker {
  private worker: Worker | undefined;
  private readonly ports = new Map<string, AgentHostPort>();

  post(message: ToAgentWorker, transfer: ArrayBuffer[] = []): void {
    this.started().postMessage(message, transfer);
  }

  attach(key: string, port: AgentHostPort): void {
    this.ports.set(key, port);
  }

  detach(key: string): void {
    this.ports.delete(key);
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    // The runner runs its TypeScript through tsx, whose loader a worker thread does not inherit:
    // the thread registers it, then imports its module.
    const tsx = import.meta.resolve("tsx/esm/api");
    const entry = new URL("./agent-worker.ts", import.meta.url).href;
    const boot = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); })`;
    const worker = new Worker(boot, { eval: true });
    worker.unref(); // the runner's own stop() ends it; it never holds the process open
    worker.on("message", (message: FromAgentWorker) => this.heard(message));
    worker.on("error", (error) => log.error("agent.worker", { outcome: "error", error }));
    worker.on("exit", (code) => {
      if (this.worker !== worker) return; // closed on purpose
      this.worker = undefined;
      log.error("agent.worker", { outcome: "exited", code, sessions: this.ports.size });
      // Their screens and shell trackers are gone: each session goes on without its agent layer.
      for (const port of this.ports.values()) port.failed(`the agent thread exited (${code})`);
      this.ports.clear();
    });
    this.worker = worker;
    return worker;
  }

  private heard(message: FromAgentWorker): void {
    const port = this.ports.get(message.key);
    if (!port) return; // a session disposed while its last words were in flight
    try {
      switch (message.op) {
        case "send":
          return port.send(message.message);
        case "type":
          return port.type(message.bytes);
        case "behind":
          return port.screenBehind(message.behind);
        case "failed":
          this.ports.delete(message.key);
          return port.failed(message.error);
      }
    } catch (error) {
      log.warn("agent.worker", { key: message.key, op: message.op, outcome: "port_threw", error });
    }
  }
}


const shared = new AgentWorker();

/** Stops the worker (the runner's stop, after its sessions are gone). */
export function closeAgentThread(): Promise<void> {
  return shared.close();
}

export class AgentThreadHost implements AgentLayer {
  private disposed = false;

  constructor(
    private readonly key: string,
    port: AgentHostPort,
    options: AgentOptions,
  ) {
    shared.attach(key, port);
    shared.post({ op: "open", key, ...options });
  }

  output(offset: number, bytes: Uint8Array): void {
    if (this.disposed) return;
    // A copy of its own, handed over: the chunk itself also goes to the log and the edge.
    const copy = new Uint8Array(bytes);
    shared.post({ op: "output", key: this.key, offset, bytes: copy }, [copy.buffer]);
  }

  resize(cols: number, rows: number): void {
    if (!this.disposed) shared.post({ op: "resize", key: this.key, cols, rows });
  }

  handle(message: EdgeLinkMessage): boolean {
    if (message.type !== "screen" && message.type !== "run") return false;
    if (!this.disposed) shared.post({ op: "call", key: this.key, message });
    return true;
  }

  resumed(): void {
    if (!this.disposed) shared.post({ op: "resumed", key: this.key });
  }

  processExited(exitCode: number | null): void {
    if (!this.disposed) shared.post({ op: "exited", key: this.key, exitCode });
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    shared.detach(this.key);
    shared.post({ op: "dispose", key: this.key });
  }
}
