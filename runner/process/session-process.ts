// What a hosted session needs of its process, whether it runs on a terminal (pty.ts, node-pty)
// or with pipes (pipe-process.ts, `pty: false`).
import type { OutputStream } from "../../shared/protocol.js";

export interface ProcessExit {
  /** null when the process was ended by a signal */
  exitCode: number | null;
  /** signal name such as "SIGKILL", or null */
  signal: string | null;
}

export interface SessionProcess {
  readonly pid: number;
  /** Output as it is read; a terminal's is all "stdout". */
  onData(listener: (bytes: Buffer, stream: OutputStream) => void): void;
  /**
   * Fires once, after every byte the process wrote has been passed to the data listeners
   * (bytes held back by pause() are passed on at resume(), and exit waits for them).
   */
  onExit(listener: (exit: ProcessExit) => void): void;
  write(bytes: Uint8Array): void;
  /** Input bytes written and not yet taken (a process that does not read leaves them queued). */
  pendingInput(): number;
  /** End of input: pipes close stdin after what was written before; a terminal gets Ctrl+D. */
  closeStdin(): void;
  /** A terminal's new size; pipes have none and ignore it. */
  resize(cols: number, rows: number): void;
  /**
   * The process group a signal "for the foreground" is meant for: a terminal's foreground group
   * (its tpgid, as a key would signal it), or the process's own group. A number read back from
   * the terminal, which may name a group that is gone and whose number the host reused: a filter
   * for the session's own processes (runner/isolation/signals.ts), never signalled as it is.
   */
  foregroundGroup(): number;
  /** Sends `signal` to the process the session started. */
  signalProcess(signal: string): void;
  /** Stops reading the output (the process blocks once the kernel's buffer is full). */
  pause(): void;
  resume(): void;
}
