// The one module that imports node-pty: spawns a process on a pseudo-terminal and
// exposes only what a hosted session needs.
import { constants } from "node:os";
import * as nodePty from "node-pty";
import { statFields } from "./proc.js";

export interface PtyExit {
  /** null when the process was ended by a signal */
  exitCode: number | null;
  /** signal name such as "SIGKILL", or null */
  signal: string | null;
}

export interface PtyProcess {
  readonly pid: number;
  onData(listener: (bytes: Buffer) => void): void;
  /** Fires once, after node-pty has closed the terminal's read side. */
  onExit(listener: (exit: PtyExit) => void): void;
  write(bytes: Uint8Array): void;
  resize(cols: number, rows: number): void;
  /** Sends `signal` to the terminal's foreground process group, as a key like Ctrl+C would. */
  signalForeground(signal: string): void;
  /** Sends `signal` to the process the session started. */
  signalProcess(signal: string): void;
  pause(): void;
  resume(): void;
}

export interface PtyOptions {
  command: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  cols: number;
  rows: number;
}

const SIGNAL_NAMES = new Map<number, string>(Object.entries(constants.signals).map(([name, num]) => [num, name]));

export function spawnPty(options: PtyOptions): PtyProcess {
  const term = nodePty.spawn(options.command, options.args, {
    name: options.env.TERM ?? "xterm-256color",
    cols: options.cols,
    rows: options.rows,
    cwd: options.cwd,
    env: options.env,
    encoding: null, // Buffers: bytes pass through untouched
  });
  const pid = term.pid;

  return {
    pid,
    onData(listener) {
      // With `encoding: null` node-pty hands out Buffers; its typings still say string.
      term.onData((chunk) => listener(chunk as unknown as Buffer));
    },
    onExit(listener) {
      term.onExit(({ exitCode, signal }) => {
        const name = signal ? (SIGNAL_NAMES.get(signal) ?? `SIG${signal}`) : null;
        listener({ exitCode: name ? null : exitCode, signal: name });
      });
    },
    write(bytes) {
      term.write(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    },
    resize(cols, rows) {
      term.resize(cols, rows);
    },
    signalForeground(signal) {
      process.kill(-foregroundGroup(pid), signal);
    },
    signalProcess(signal) {
      process.kill(pid, signal);
    },
    pause() {
      term.pause();
    },
    resume() {
      term.resume();
    },
  };
}

/** The terminal's foreground process group (tpgid); the session's own group as a fallback. */
function foregroundGroup(pid: number): number {
  const tpgid = Number(statFields(pid)?.[5]);
  return tpgid > 0 ? tpgid : pid;
}
