// The agent thread (agent-thread.ts): every hosted terminal's AgentHost (agent-host.ts: its
// screen's emulator and its shell tracker), fed in order by the runner's main thread, answering
// through it. A host that throws is disposed and reported `failed`; the others go on.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { parentPort } from "node:worker_threads";
import { log, setLogLevel } from "../../shared/log.js";
import { AgentHost } from "./agent-host.js";
import { onDropped } from "./screen-idle.js";
import type { FromAgentWorker, ToAgentWorker } from "./agent-thread.js";

const port = parentPort;
if (!port) throw new Error("agent-worker.ts runs as a worker thread (agent-thread.ts starts it)");
// The runner's LOG_LEVEL (main.ts sets it on its own thread; a worker's module state is its own).
setLogLevel(process.env.LOG_LEVEL);
// After a sweep dropped idle emulators, a full collection of this thread's heap (a few ms, off the
// thread that reads PTYs; at most once per sweep, ≤ 1 a second): without it V8 keeps their memory
// for a long while and the runner's RSS does not go down (docs/architecture.md, "Idle screens").
setFlagsFromString("--expose-gc");
onDropped(runInNewContext("gc") as () => void);
const hosts = new Map<string, AgentHost>();
const say = (message: FromAgentWorker, transfer: ArrayBuffer[] = []) => port.postMessage(message, transfer);

function failed(key: string, error: unknown): void {
  hosts.get(key)?.dispose();
  hosts.delete(key);
  say({ op: "failed", key, error: error instanceof Error ? error.message : String(error) });
}

port.on("message", (message: ToAgentWorker) => {
  const { key } = message;
  try {
    if (message.op === "open") {
      hosts.get(key)?.dispose();
      const host = new AgentHost(
        key,
        {
          send: (reply) => say({ op: "send", key, message: reply }),
          type: (bytes) => {
            const copy = new Uint8Array(bytes);
            say({ op: "type", key, bytes: copy }, [copy.buffer]);
          },
          screenBehind: (behind) => say({ op: "behind", key, behind }),
          failed: (error) => failed(key, error),
        },
        { cols: message.cols, rows: message.rows, shellIntegration: message.shellIntegration, screenIdleMs: message.screenIdleMs },
      );
      hosts.set(key, host);
      return;
    }
    const host = hosts.get(key);
    if (!host) return; // failed earlier (the session no longer calls it), or disposed
    switch (message.op) {
      case "output":
        return host.output(message.offset, message.bytes);
      case "resize":
        return host.resize(message.cols, message.rows);
      case "call":
        host.handle(message.message);
        return;
      case "resumed":
        return host.resumed();
      case "exited":
        return host.processExited(message.exitCode);
      case "dispose":
        host.dispose();
        hosts.delete(key);
        return;
    }
  } catch (error) {
    log.error("agent.output", { key, op: message.op, error });
    failed(key, error);
  }
});
